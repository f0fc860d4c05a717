/* test_files.c — escapes through the files API (isolation.md §3 #1–#3):
 * traversal, symlinks the sandbox planted, and a symlink swapped in and
 * out of a directory while the daemon reads, writes, lists, globs and
 * removes through it thousands of times.  Every outcome must be a file of
 * the sandbox (or an error), never a host file: host files carry content
 * and names the sandbox cannot have, and the test looks for them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "harness.h"

static char host_passwd[65536];
static char sandbox_passwd[4096];
static char secret_name[64], secret_path[96];

static void slurp_host(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
  buf[n > 0 ? n : 0] = '\0';
  if (fd >= 0)
    close(fd);
}

/* Reads a sandbox file through the API: 0 and its bytes in buf, or -1. */
static int api_read(struct sbx_sandbox *sb, const char *path, char *buf, size_t len)
{
  int fd = -1;
  struct sbx_error err = {0};
  buf[0] = '\0';
  if (sbx_sandbox_file_open_read(sb, path, &fd, NULL, &err) < 0)
    return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n < 0 ? -1 : 0;
}

static int api_write(struct sbx_sandbox *sb, const char *path, const char *data)
{
  struct sbx_error err = {0};
  return sbx_sandbox_file_write(sb, path, data, strlen(data), &err);
}

static bool is_host_passwd(const char *s) { return s[0] && !strcmp(s, host_passwd); }

static void plant_host_secret(void)
{
  snprintf(secret_name, sizeof secret_name, "sbxsecret-%d", (int)getpid());
  snprintf(secret_path, sizeof secret_path, "/tmp/%s", secret_name);
  FILE *f = fopen(secret_path, "we");
  if (f) {
    fputs("HOSTSECRET\n", f);
    fclose(f);
  }
}

/* #1 traversal: rejected, nothing outside touched. */
static void files_traversal(struct sbx_sandbox *sb)
{
  static const char *const bad[] = {"../../etc/passwd",
                                    "/../../etc/shadow",
                                    "a/../../x",
                                    "/work/../../etc/passwd",
                                    "/proc/1/root/etc/shadow",
                                    "/proc/self/root/etc/passwd",
                                    "/etc/shadow",
                                    NULL};
  char buf[65536];
  for (int i = 0; bad[i]; i++) {
    int r = api_read(sb, bad[i], buf, sizeof buf);
    CHECK(r < 0 && !is_host_passwd(buf));
    if (r == 0)
      fprintf(stderr, "  read %s succeeded: %.60s\n", bad[i], buf);
  }
  char w[128];
  snprintf(w, sizeof w, "../../tmp/pwn-%d", (int)getpid());
  CHECK(api_write(sb, w, "PWN") < 0);
  snprintf(w, sizeof w, "/../../tmp/pwn-%d", (int)getpid());
  CHECK(api_write(sb, w, "PWN") < 0);
  snprintf(w, sizeof w, "/tmp/pwn-%d", (int)getpid());
  CHECK(access(w, F_OK) < 0);
  struct sbx_error err = {0};
  struct sbx_dirent *ents = NULL;
  size_t n = 0;
  CHECK(sbx_sandbox_list(sb, "/../..", &ents, &n, 100, &err) < 0);
  free(ents);
  char **g = NULL;
  CHECK(sbx_sandbox_glob(sb, "/work/../../etc/*", &g, &n, 100, &err) < 0);
  CHECK(sbx_sandbox_remove(sb, "../../tmp", &err) < 0);
  /* the sandbox's own /etc/passwd is the synthetic one */
  CHECK(api_read(sb, "/etc/passwd", sandbox_passwd, sizeof sandbox_passwd) == 0);
  CHECK(strstr(sandbox_passwd, "sandbox:x:1000:1000") && !is_host_passwd(sandbox_passwd));
  CHECK(api_write(sb, "/etc/passwd", "root::0:0::/:/bin/sh\n") < 0); /* read-only */
}

static bool names_have(const struct sbx_dirent *e, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (!strcmp(e[i].name, name))
      return true;
  return false;
}

static void planted_reads(struct sbx_sandbox *sb)
{
  char buf[65536], p[160];
  CHECK(api_read(sb, "/work/rootlink/etc/passwd", buf, sizeof buf) == 0 &&
        !strcmp(buf, sandbox_passwd));
  CHECK(api_read(sb, "/work/etclink/passwd", buf, sizeof buf) == 0 &&
        !strcmp(buf, sandbox_passwd));
  /* a symlink as the last component is never followed */
  CHECK(api_read(sb, "/work/out.txt", buf, sizeof buf) < 0 && !is_host_passwd(buf));
  CHECK(api_read(sb, "/work/magic/etc/passwd", buf, sizeof buf) < 0 && !is_host_passwd(buf));
  CHECK(api_read(sb, "/work/etclink/shadow", buf, sizeof buf) < 0);
  snprintf(p, sizeof p, "/work/rootlink/tmp/%s", secret_name);
  CHECK(api_read(sb, p, buf, sizeof buf) < 0 && !strstr(buf, "HOSTSECRET"));
  snprintf(p, sizeof p, "/work/sub/up/tmp/%s", secret_name);
  CHECK(api_read(sb, p, buf, sizeof buf) < 0 && !strstr(buf, "HOSTSECRET"));
}

static void planted_writes(struct sbx_sandbox *sb)
{
  char p[160], hp[160], buf[256];
  unsigned long long before = 0;
  for (const char *c = host_passwd; *c; c++)
    before = before * 31 + (unsigned char)*c;
  snprintf(p, sizeof p, "/work/rootlink/tmp/sbxw-%d", (int)getpid());
  CHECK(api_write(sb, p, "INSIDE") == 0);
  snprintf(p, sizeof p, "/work/sub/up/tmp/sbxw2-%d", (int)getpid());
  CHECK(api_write(sb, p, "INSIDE") == 0);
  snprintf(hp, sizeof hp, "/tmp/sbxw-%d", (int)getpid());
  CHECK(access(hp, F_OK) < 0);
  snprintf(hp, sizeof hp, "/tmp/sbxw2-%d", (int)getpid());
  CHECK(access(hp, F_OK) < 0);
  snprintf(p, sizeof p, "/tmp/sbxw-%d", (int)getpid()); /* where it really went */
  CHECK(api_read(sb, p, buf, sizeof buf) == 0 && !strcmp(buf, "INSIDE"));
  CHECK(api_write(sb, "/work/etclink/sbxw", "x") < 0);
  CHECK(access("/etc/sbxw", F_OK) < 0);
  CHECK(api_write(sb, "/work/out.txt", "root::0:0::/:/bin/sh\n") < 0);
  char now[65536];
  slurp_host("/etc/passwd", now, sizeof now);
  unsigned long long after = 0;
  for (const char *c = now; *c; c++)
    after = after * 31 + (unsigned char)*c;
  CHECK(before == after);
}

static void planted_listings(struct sbx_sandbox *sb)
{
  struct sbx_error err = {0};
  struct sbx_dirent *e = NULL;
  size_t n = 0;
  CHECK(sbx_sandbox_list(sb, "/work/rootlink", &e, &n, 1000, &err) == 0);
  CHECK(names_have(e, n, "work") && names_have(e, n, "usr"));
  CHECK(!names_have(e, n, "home") && !names_have(e, n, "var") && !names_have(e, n, "old_root") &&
        !names_have(e, n, "farm"));
  free(e);
  e = NULL;
  CHECK(sbx_sandbox_list(sb, "/work/rootlink/tmp", &e, &n, 1000, &err) == 0);
  CHECK(!names_have(e, n, secret_name));
  free(e);
  e = NULL;
  CHECK(sbx_sandbox_list(sb, "/work/etclink", &e, &n, 1000, &err) == 0);
  CHECK(names_have(e, n, "passwd") && !names_have(e, n, "shadow") &&
        !names_have(e, n, "sudoers"));
  free(e);
  char **g = NULL;
  CHECK(sbx_sandbox_glob(sb, "/work/rootlink/tmp/sbx*", &g, &n, 100, &err) == 0);
  for (size_t i = 0; g && i < n; i++) {
    CHECK(!strstr(g[i], secret_name));
    free(g[i]);
  }
  free(g);
  CHECK(sbx_sandbox_glob(sb, "/work/etclink/*", &g, &n, 100, &err) == 0 && n > 0);
  for (size_t i = 0; g && i < n; i++) {
    CHECK(!strstr(g[i], "shadow") && !strncmp(g[i], "/work/etclink/", 14));
    free(g[i]);
  }
  free(g);
}

/* #2 planted symlinks: to "/", to "/etc", to a file, a magic link, and a
 * relative one climbing above the root. */
static void files_planted_symlinks(struct sbx_sandbox *sb)
{
  struct sbx_exec_result res;
  char *out = h_sh(sb,
                   "ln -s / /work/rootlink && ln -s /etc /work/etclink && "
                   "ln -s /etc/passwd /work/out.txt && ln -s /proc/1/root /work/magic && "
                   "mkdir /work/sub && ln -s ../../../../../.. /work/sub/up && echo planted",
                   &res);
  CHECK(out && !strcmp(out, "planted\n"));
  free(out);
  sbx_exec_result_free(&res);
  planted_reads(sb);
  planted_writes(sb);
  planted_listings(sb);
  /* removing through a link removes the link, never what it points to */
  struct sbx_error err = {0};
  CHECK(sbx_sandbox_remove(sb, "/work/rootlink", &err) == 0);
  CHECK(sbx_sandbox_remove(sb, "/work/etclink/passwd", &err) < 0);
  CHECK(access(secret_path, F_OK) == 0);
  char buf[4096];
  CHECK(api_read(sb, "/etc/passwd", buf, sizeof buf) == 0 && !strcmp(buf, sandbox_passwd));
}

struct race_stats {
  int inside, sandbox_root, errors, host;
};

static void race_reads(struct sbx_sandbox *sb, int n, struct race_stats *st)
{
  char buf[65536];
  for (int i = 0; i < n; i++) {
    if (api_read(sb, "/work/d/etc/passwd", buf, sizeof buf) < 0)
      st->errors++;
    else if (!strcmp(buf, "INSIDE\n"))
      st->inside++;
    else if (!strcmp(buf, sandbox_passwd))
      st->sandbox_root++;
    else
      st->host++; /* anything else is a file we never made */
  }
}

static void race_writes(struct sbx_sandbox *sb, int n, struct race_stats *st)
{
  char p[96], hp[96];
  snprintf(p, sizeof p, "/work/d/tmp/sbxrace-%d", (int)getpid());
  snprintf(hp, sizeof hp, "/tmp/sbxrace-%d", (int)getpid());
  struct sbx_error err = {0};
  for (int i = 0; i < n; i++) {
    if (api_write(sb, p, "RACE") < 0)
      st->errors++;
    if (i % 4 == 0)
      sbx_sandbox_remove(sb, p, &err);
    if (access(hp, F_OK) == 0)
      st->host++;
  }
}

static void race_listings(struct sbx_sandbox *sb, int n, struct race_stats *st)
{
  struct sbx_error err = {0};
  for (int i = 0; i < n; i++) {
    struct sbx_dirent *e = NULL;
    size_t k = 0;
    if (sbx_sandbox_list(sb, "/work/d", &e, &k, 1000, &err) == 0 &&
        (names_have(e, k, "home") || names_have(e, k, "var") || names_have(e, k, "farm")))
      st->host++;
    free(e);
    char **g = NULL;
    if (sbx_sandbox_glob(sb, "/work/d/tmp/*", &g, &k, 1000, &err) == 0)
      for (size_t j = 0; j < k; j++) {
        st->host += strstr(g[j], secret_name) != NULL;
        free(g[j]);
      }
    free(g);
  }
}

/* #3 the swap race: the sandbox exchanges /work/d (a real dir) and
 * /work/dl (a symlink to "/") in a tight loop while we go through d. */
static void files_swap_race(struct sbx_sandbox *sb)
{
  char marker[64], tag[80];
  snprintf(marker, sizeof marker, "race%d", (int)getpid());
  snprintf(tag, sizeof tag, "tag:%s", marker);
  const char *v[] = {tag, "swap_race:/work", NULL};
  struct h_bg bg;
  CHECK(h_bg_start(&bg, sb, v, 120000) == 0);
  CHECK(h_marker_wait(marker, 5000));
  char buf[64];
  /* until the racer has built d: its passwd opens between the racer's
   * O_CREAT and its write, so wait for the bytes, not the open */
  for (int i = 0; i < 200 && (api_read(sb, "/work/d/etc/passwd", buf, sizeof buf) < 0 ||
                              strcmp(buf, "INSIDE\n") != 0);
       i++)
    usleep(5000);
  struct race_stats st = {0};
  uint64_t t0 = sbx_now_ms();
  race_reads(sb, 4000, &st);
  race_writes(sb, 1500, &st);
  race_listings(sb, 300, &st);
  uint64_t ms = sbx_now_ms() - t0;
  h_bg_stop(&bg);
  printf("swap race: %d inside, %d sandbox root, %d errors, %d host (in %llu ms)\n", st.inside,
         st.sandbox_root, st.errors, st.host, (unsigned long long)ms);
  CHECK(st.host == 0);
  CHECK(st.inside > 0 && st.sandbox_root > 0); /* the race really raced */
  char hp[96];
  snprintf(hp, sizeof hp, "/tmp/sbxrace-%d", (int)getpid());
  CHECK(access(hp, F_OK) < 0);
  CHECK(access(secret_path, F_OK) == 0);
}

int main(void)
{
  int r = h_setup();
  if (r)
    return r;
  slurp_host("/etc/passwd", host_passwd, sizeof host_passwd);
  plant_host_secret();
  struct sbx_sandbox *sb = h_make((struct sbx_limits){.memory_bytes = 256 << 20, .pids = 64});
  CHECK(sb != NULL);
  if (sb) {
    files_traversal(sb);
    files_planted_symlinks(sb);
    files_swap_race(sb);
    h_drv->destroy(sb);
  }
  unlink(secret_path);
  return h_finish("isolation-files");
}
