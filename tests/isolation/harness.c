/* harness.c — see harness.h. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "isolation/iso.h"
#include "isolation/pool.h"

const struct sbx_driver *h_drv = &sbx_drv_container;
char *h_probe_bytes;
size_t h_probe_len;
char h_parent[64];
static unsigned long seq;
static char *envp[] = {"PATH=/usr/bin:/bin", "HOME=/work", NULL};

static int load_probe(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  struct stat st;
  fstat(fileno(f), &st);
  h_probe_len = (size_t)st.st_size;
  h_probe_bytes = malloc(h_probe_len);
  size_t got = h_probe_bytes ? fread(h_probe_bytes, 1, h_probe_len, f) : 0;
  fclose(f);
  return got == h_probe_len ? 0 : -1;
}

int h_setup(void)
{
  const char *init = getenv("SBX_INIT_PATH"), *probe = getenv("SBX_PROBE_PATH");
  if (geteuid() != 0 || !init || !probe) {
    return check_skip("isolation: needs root, SBX_INIT_PATH and SBX_PROBE_PATH");
  }
  if (load_probe(probe) < 0) {
    perror(probe);
    return 1;
  }
  /* this run's own cgroup parent: never touch a real daemon's sandboxes */
  snprintf(h_parent, sizeof h_parent, "sandboxd-test-%d", (int)getpid());
  sbx_container_pool_configure(0);
  /* the daemon's driver settings, as config.c would give them; the
   * overlay form and layer idmapping from meson (isolation-overlay-*) */
  static struct sbx_driver_setting set[3];
  set[0] = (struct sbx_driver_setting){"cgroup_parent", h_parent};
  set[1] = (struct sbx_driver_setting){"overlay_layers", getenv("SANDBOXD_OVERLAY_LAYERS")};
  set[2] =
      (struct sbx_driver_setting){"image_layer_idmap", getenv("SANDBOXD_IMAGE_LAYER_IDMAP")};
  static struct sbx_driver_env env = {.state_dir = "/tmp", .settings = set, .nsettings = 3};
  env.init_path = init;
  char why[256];
  if (h_drv->probe(&env, why, sizeof why) < 0) {
    fprintf(stderr, "probe: %s\n", why);
    return 1;
  }
  return 0;
}

void h_teardown(void)
{
  if (h_drv->shutdown)
    h_drv->shutdown();
  const struct sbx_cg_host *h = sbx_cg_host_default();
  for (int i = 0; i < h->nctrl; i++)
    rmdir(h->ctrl[i].parent);
}

struct sbx_sandbox *h_make_profile(const char *profile, struct sbx_limits lim)
{
  char id[64];
  snprintf(id, sizeof id, "t%d_%lu", (int)getpid(), ++seq);
  struct sbx_sandbox_spec spec = {.id = id, .profile = profile, .image = "host", .limits = lim};
  struct sbx_sandbox *sb = NULL;
  struct sbx_error err = {0};
  if (h_drv->create(&spec, &sb, &err) < 0) {
    fprintf(stderr, "create: %s\n", err.msg);
    return NULL;
  }
  if (sbx_sandbox_file_write(sb, "/work/probe", h_probe_bytes, h_probe_len, &err) < 0) {
    fprintf(stderr, "upload probe: %s\n", err.msg);
    h_drv->destroy(sb);
    return NULL;
  }
  return sb;
}

struct sbx_sandbox *h_make(struct sbx_limits lim) { return h_make_profile("test", lim); }

static char *exec_argv(struct sbx_sandbox *sb, char **argv, uint64_t timeout_ms,
                       struct sbx_cancel *cancel, struct sbx_exec_result *res)
{
  struct sbx_exec_request req = {.argv = argv,
                                 .env = envp,
                                 .timeout_ms = timeout_ms,
                                 .cancel = cancel};
  struct sbx_error err = {0};
  if (sbx_sandbox_exec(sb, &req, res, &err) < 0) {
    fprintf(stderr, "exec: %s\n", err.msg);
    return NULL;
  }
  return strdup(res->std_out.buf ? res->std_out.buf : "");
}

char *h_run_opts(struct sbx_sandbox *sb, const char *const *verbs, uint64_t timeout_ms,
                 struct sbx_cancel *cancel, struct sbx_exec_result *res)
{
  char *argv[128] = {"/bin/sh", "-c", "chmod 755 /work/probe && exec /work/probe \"$@\"",
                     "probe"};
  int n = 4;
  for (int i = 0; verbs[i] && n < 127; i++)
    argv[n++] = (char *)verbs[i];
  argv[n] = NULL;
  char *out = exec_argv(sb, argv, timeout_ms, cancel, res);
  if (out && res->std_err.len && res->std_err.len < 2000)
    fprintf(stderr, "probe stderr: %s\n", res->std_err.buf);
  return out;
}

char *h_run(struct sbx_sandbox *sb, const char *const *verbs, struct sbx_exec_result *res)
{
  return h_run_opts(sb, verbs, 30000, NULL, res);
}

char *h_sh(struct sbx_sandbox *sb, const char *cmd, struct sbx_exec_result *res)
{
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  return exec_argv(sb, argv, 30000, NULL, res);
}

const char *h_outcome(const char *out, const char *verb, char *buf, size_t len)
{
  size_t vl = strlen(verb);
  for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, verb, vl) && l[vl] == ' ') {
      const char *e = strchr(l, '\n');
      size_t n = e ? (size_t)(e - l - vl - 1) : strlen(l + vl + 1);
      snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), l + vl + 1);
      return buf;
    }
  snprintf(buf, len, "(missing)");
  return buf;
}

/* ---- host-side observers ------------------------------------------------ */

static ssize_t slurp_small(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

/* Calls fn for every numeric /proc entry; stops early when fn returns 1. */
static void each_pid(int (*fn)(const char *pid, void *ctx), void *ctx)
{
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && fn(e->d_name, ctx))
      break;
  if (d)
    closedir(d);
}

/* pid's /proc/<pid>/cgroup into buf; false if it is gone. */
static bool cgroups_of(const char *pid, char *buf, size_t len)
{
  char p[64];
  snprintf(p, sizeof p, "/proc/%s/cgroup", pid);
  return slurp_small(p, buf, len) > 0;
}

/* Whether those cgroups are this run's (under h_parent). */
static bool in_our_cgroups(const char *cgroups)
{
  char mine[80];
  snprintf(mine, sizeof mine, "/%s/", h_parent);
  return strstr(cgroups, mine) != NULL;
}

/* Belongs to another sandboxd instance (daemon or test run) than ours. */
static bool foreign(const char *pid)
{
  char buf[4096];
  return cgroups_of(pid, buf, sizeof buf) && strstr(buf, "/sandboxd") && !in_our_cgroups(buf);
}

struct marker_ctx {
  const char *marker;
  int n;
};

static int marker_fn(const char *pid, void *ctx)
{
  struct marker_ctx *m = ctx;
  char p[64], buf[8192];
  snprintf(p, sizeof p, "/proc/%s/cmdline", pid);
  ssize_t n = slurp_small(p, buf, sizeof buf);
  for (ssize_t i = 0; i < n; i++)
    if (!buf[i])
      buf[i] = ' ';
  if (n > 0 && atoi(pid) != getpid() && strstr(buf, m->marker))
    m->n++;
  return 0;
}

int h_marker_count(const char *marker)
{
  struct marker_ctx m = {marker, 0};
  each_pid(marker_fn, &m);
  return m.n;
}

int h_marker_gone(const char *marker, int ms)
{
  uint64_t t0 = sbx_now_ms();
  for (;;) {
    if (h_marker_count(marker) == 0)
      return (int)(sbx_now_ms() - t0);
    if (sbx_now_ms() - t0 > (uint64_t)ms)
      return -1;
    usleep(10000);
  }
}

int h_fd_count(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  while (d && readdir(d))
    n++;
  if (d)
    closedir(d);
  return n;
}

long h_vmrss_kb(void)
{
  char buf[4096];
  if (slurp_small("/proc/self/status", buf, sizeof buf) <= 0)
    return -1;
  const char *l = strstr(buf, "VmRSS:");
  return l ? atol(l + 6) : -1;
}

int h_cg_dirs(void)
{
  const struct sbx_cg_host *h = sbx_cg_host_default();
  int n = 0;
  for (int i = 0; i < h->nctrl; i++) {
    DIR *d = opendir(h->ctrl[i].parent);
    struct dirent *e;
    while (d && (e = readdir(d)))
      n += e->d_type == DT_DIR && e->d_name[0] != '.';
    if (d)
      closedir(d);
  }
  return n;
}

void h_ns_link(int pid, const char *ns, char *buf, size_t len)
{
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/ns/%s", pid, ns);
  ssize_t n = readlink(p, buf, len - 1);
  buf[n > 0 ? n : 0] = '\0';
}

struct ns_ctx {
  const char *ns, *link;
  int n;
};

static bool fd_holds(const char *pid, const char *link)
{
  char p[64], l[128];
  snprintf(p, sizeof p, "/proc/%s/fd", pid);
  DIR *d = opendir(p);
  struct dirent *e;
  bool hit = false;
  while (d && !hit && (e = readdir(d))) {
    char fp[320];
    snprintf(fp, sizeof fp, "%s/%s", p, e->d_name);
    ssize_t n = readlink(fp, l, sizeof l - 1);
    l[n > 0 ? n : 0] = '\0';
    hit = n > 0 && !strcmp(l, link);
  }
  if (d)
    closedir(d);
  return hit;
}

static int ns_fn(const char *pid, void *ctx)
{
  struct ns_ctx *c = ctx;
  if (foreign(pid))
    return 0; /* a freed namespace's inode number may be reused anywhere */
  char l[128];
  h_ns_link(atoi(pid), c->ns, l, sizeof l);
  if (!strcmp(l, c->link) || fd_holds(pid, c->link))
    c->n++;
  return 0;
}

int h_ns_holders(const char *ns, const char *link)
{
  struct ns_ctx c = {ns, link, 0};
  if (!link[0])
    return 0;
  each_pid(ns_fn, &c);
  return c.n;
}

#define MAX_NS 4096
struct netns_ctx {
  unsigned long long ino[MAX_NS];
  int n;
};

/* In this run's cgroups, or this process or a child of it: what a sandbox
 * of ours is made of, or what it leaves behind.  Other processes of the
 * host (a CI runner's, a test host in a network namespace) make and drop
 * namespaces of their own at any moment. */
static bool ours(const char *pid)
{
  char p[64], buf[4096];
  if (atoi(pid) == getpid() || (cgroups_of(pid, buf, sizeof buf) && in_our_cgroups(buf)))
    return true;
  snprintf(p, sizeof p, "/proc/%s/stat", pid);
  const char *rp = slurp_small(p, buf, sizeof buf) > 0 ? strrchr(buf, ')') : NULL;
  int ppid = 0;
  return rp && sscanf(rp, ") %*c %d", &ppid) == 1 && ppid == getpid();
}

static int netns_fn(const char *pid, void *ctx)
{
  struct netns_ctx *c = ctx;
  if (!ours(pid))
    return 0;
  char l[128];
  h_ns_link(atoi(pid), "net", l, sizeof l);
  unsigned long long ino;
  if (sscanf(l, "net:[%llu]", &ino) != 1)
    return 0;
  for (int i = 0; i < c->n; i++)
    if (c->ino[i] == ino)
      return 0;
  if (c->n < MAX_NS)
    c->ino[c->n++] = ino;
  return 0;
}

int h_netns_count(void)
{
  static struct netns_ctx c;
  c.n = 0;
  each_pid(netns_fn, &c);
  return c.n;
}

static int mount_fn(const char *pid, void *ctx)
{
  int *n = ctx;
  if (foreign(pid))
    return 0;
  char p[64];
  snprintf(p, sizeof p, "/proc/%s/mountinfo", pid);
  FILE *f = fopen(p, "re");
  char line[1024];
  bool hit = false;
  while (f && !hit && fgets(line, sizeof line, f))
    hit = strstr(line, " sbx-root ") || strstr(line, " sbx-tmp ") || strstr(line, " sbx-work ");
  if (f)
    fclose(f);
  *n += hit;
  return 0;
}

int h_sbx_mount_holders(void)
{
  int n = 0;
  each_pid(mount_fn, &n);
  return n;
}

/* ---- background execs ------------------------------------------------- */

static void *bg_main(void *arg)
{
  struct h_bg *bg = arg;
  bg->out = h_run_opts(bg->sb, bg->verbs, bg->timeout_ms, &bg->cancel, &bg->res);
  return NULL;
}

int h_bg_start(struct h_bg *bg, struct sbx_sandbox *sb, const char *const *verbs,
               uint64_t timeout_ms)
{
  memset(bg, 0, sizeof *bg);
  bg->sb = sb;
  bg->timeout_ms = timeout_ms;
  for (int i = 0; verbs[i] && i < 31; i++)
    bg->verbs[i] = verbs[i];
  if (sbx_cancel_init(&bg->cancel) < 0)
    return -1;
  if (pthread_create(&bg->thread, NULL, bg_main, bg) != 0) {
    sbx_cancel_destroy(&bg->cancel);
    return -1;
  }
  return 0;
}

bool h_marker_wait(const char *marker, int ms)
{
  uint64_t t0 = sbx_now_ms();
  while (h_marker_count(marker) == 0) {
    if (sbx_now_ms() - t0 > (uint64_t)ms)
      return false;
    usleep(5000);
  }
  return true;
}

void h_bg_stop(struct h_bg *bg)
{
  sbx_cancel_fire(&bg->cancel, SBX_RS_CANCELLED);
  pthread_join(bg->thread, NULL);
  sbx_cancel_destroy(&bg->cancel);
  sbx_exec_result_free(&bg->res);
  free(bg->out);
  bg->out = NULL;
}
