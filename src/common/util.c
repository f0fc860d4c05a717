/* util.c — see util.h. */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t sbx_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t sbx_now_ms(void) { return sbx_now_ns() / 1000000ULL; }

int sbx_ms_until(uint64_t deadline)
{
  uint64_t now = sbx_now_ms();
  if (now >= deadline)
    return 0;
  return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

int sbx_poll_until(struct pollfd *p, unsigned n, uint64_t deadline)
{
  for (;;) {
    int left = sbx_ms_until(deadline);
    if (left == 0)
      return 0;
    int r = poll(p, n, left);
    if (r >= 0 || errno != EINTR)
      return r;
  }
}

int64_t sbx_wall_s(void) { return (int64_t)time(NULL); }

void sbx_cond_init_monotonic(pthread_cond_t *c)
{
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(c, &ca);
  pthread_condattr_destroy(&ca);
}

int sbx_thread_detached(void *(*fn)(void *), void *arg)
{
  pthread_attr_t a;
  pthread_t t;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &a, fn, arg);
  pthread_attr_destroy(&a);
  return rc;
}

void sbx_timespec_in(clockid_t clk, unsigned ms, struct timespec *ts)
{
  clock_gettime(clk, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

void sbx_format_time(int64_t t, char *buf, size_t len)
{
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sbx_random_bytes(void *buf, size_t len) { randombytes_buf(buf, len); }

void sbx_hex(const void *in, size_t len, char *out)
{
  static const char digits[] = "0123456789abcdef";
  const unsigned char *p = in;
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * len] = '\0';
}

void sbx_random_id(const char *prefix, char *buf, size_t len)
{
  unsigned char raw[12];
  char hex[sizeof raw * 2 + 1];
  randombytes_buf(raw, sizeof raw);
  sbx_hex(raw, sizeof raw, hex);
  snprintf(buf, len, "%s_%s", prefix, hex);
}

int sbx_set_cloexec(int fd, int on)
{
  int f = fcntl(fd, F_GETFD);
  if (f < 0)
    return -1;
  return fcntl(fd, F_SETFD, on ? f | FD_CLOEXEC : f & ~FD_CLOEXEC);
}

int sbx_set_nonblock(int fd, int on)
{
  int f = fcntl(fd, F_GETFL);
  if (f < 0)
    return -1;
  return fcntl(fd, F_SETFL, on ? f | O_NONBLOCK : f & ~O_NONBLOCK);
}

ssize_t sbx_write_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, p + done, len - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    done += (size_t)n;
  }
  return (ssize_t)done;
}

ssize_t sbx_read_all(int fd, void *buf, size_t len)
{
  char *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = read(fd, p + done, len - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (n == 0)
      break;
    done += (size_t)n;
  }
  return (ssize_t)done;
}

int sbx_mkdir_p(const char *path, unsigned mode)
{
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0 && errno != EEXIST)
    return -1;
  return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)ftw;
  if (flag == FTW_DP)
    return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
  return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int sbx_rm_rf(const char *path)
{
  /* FTW_PHYS: never follow symlinks; FTW_MOUNT: never cross into a mount
   * that a sandbox may still have (a leftover tmpfs must be unmounted first). */
  int r = nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (r < 0 && errno == ENOENT)
    return 0;
  return r;
}
