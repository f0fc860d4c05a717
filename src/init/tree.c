/* tree.c — find, kill and reap every descendant of this process.
 *
 * Used by the shepherd (a child subreaper: orphans of its workload reparent
 * to it) and by sbx-init at shutdown.  Kill, reap, look again: each killed
 * process's own children reparent to us, so the loop ends when nothing is
 * left, double-forked daemons included. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"

#define MAX_BATCH 4096

struct sbxi_reaped sbxi_reaped;

pid_t sbxi_wait(pid_t pid, int *status, int options)
{
  struct rusage ru;
  pid_t r = wait4(pid, status, options, &ru);
  if (r > 0) {
    sbxi_reaped.cpu_us += (uint64_t)ru.ru_utime.tv_sec * 1000000 +
                          (uint64_t)ru.ru_utime.tv_usec +
                          (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
    if (ru.ru_maxrss > 0 && (uint64_t)ru.ru_maxrss > sbxi_reaped.maxrss_kb)
      sbxi_reaped.maxrss_kb = (uint64_t)ru.ru_maxrss;
  }
  return r;
}

static size_t parse_pids(const char *s, pid_t *out, size_t max)
{
  size_t n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s)
      break;
    if (v > 0)
      out[n++] = (pid_t)v;
    s = end;
  }
  return n;
}

/* /proc/self/task/<pid>/children: exact, cheap (CONFIG_PROC_CHILDREN). */
static ssize_t children_fast(pid_t self, pid_t *out, size_t max)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)self);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  static char buf[MAX_BATCH * 12];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return (ssize_t)parse_pids(buf, out, max);
}

static pid_t stat_ppid(const char *pidname)
{
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%s/stat", pidname);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  /* comm may contain anything, so parse after its last ')' */
  char *p = strrchr(buf, ')');
  int ppid;
  if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
    return -1;
  return ppid;
}

static ssize_t children_scan(pid_t self, pid_t *out, size_t max)
{
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    if (stat_ppid(e->d_name) == self)
      out[n++] = (pid_t)atoi(e->d_name);
  }
  closedir(d);
  return (ssize_t)n;
}

static void reap(pid_t pid, pid_t main, int *main_status, bool *main_reaped)
{
  int st;
  pid_t r;
  do
    r = sbxi_wait(pid, &st, 0);
  while (r < 0 && errno == EINTR);
  if (r == main && main > 0 && main_status) {
    *main_status = st;
    *main_reaped = true;
  }
}

/* Without /proc there is no way to list children: reap what has died
 * (never block: a survivor we cannot name would hang us forever). */
static void reap_blind(pid_t main, int *main_status, bool *main_reaped)
{
  int st;
  pid_t r;
  while ((r = sbxi_wait(-1, &st, WNOHANG)) > 0)
    if (r == main && main > 0 && main_status) {
      *main_status = st;
      *main_reaped = true;
    }
}

bool sbxi_kill_tree(pid_t main, int *main_status, bool *main_reaped)
{
  static pid_t pids[MAX_BATCH];
  pid_t self = getpid();
  for (;;) {
    ssize_t n = children_fast(self, pids, MAX_BATCH);
    if (n < 0)
      n = children_scan(self, pids, MAX_BATCH);
    if (n < 0) {
      reap_blind(main, main_status, main_reaped);
      return false;
    }
    if (n == 0)
      return true;
    for (ssize_t i = 0; i < n; i++)
      kill(pids[i], SIGKILL);
    for (ssize_t i = 0; i < n; i++)
      reap(pids[i], main, main_status, main_reaped);
  }
}
