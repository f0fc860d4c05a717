/* cgroup.c — one cgroup per sandbox, v1 or v2 (isolation.md §1 A1, F4, F5).
 *
 * Sandbox cgroups live under the daemon's own cgroup, in a parent dir
 * named "sandboxd" (SANDBOXD_CGROUP_PARENT overrides it, e.g. one per test
 * run), and nowhere else: <daemon cgroup>/<parent>/<leaf>.
 *
 * v1 (this machine and CI): a leaf in each of memory, pids, cpu, cpuacct
 * and freezer (cpu and cpuacct may share a hierarchy).  Limits:
 * memory.limit_in_bytes and memory.memsw.limit_in_bytes (no swap beyond
 * the memory limit), OOM killer on, pids.max, cpu.cfs_quota_us/period.
 * Whole-tree kill with the freezer: FROZEN, SIGKILL every pid, THAWED —
 * a frozen fork bomb cannot outrun the kill.
 * v2: memory.max, memory.swap.max=0, memory.oom.group=0, pids.max,
 * cpu.max, cgroup.kill; the child enters with CLONE_INTO_CGROUP.  The v2
 * path is tested against a fake tree only (docs/cgroups.md has the gap).
 * All paths here are daemon-controlled cgroupfs paths. */
#include "isolation/iso.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"

static const struct {
  const char *name;
  unsigned mask;
} v1_ctrls[] = {
    {"memory", SBX_CGC_MEMORY},   {"pids", SBX_CGC_PIDS},       {"cpu", SBX_CGC_CPU},
    {"cpuacct", SBX_CGC_CPUACCT}, {"freezer", SBX_CGC_FREEZER},
};

/* ---- small file helpers ---------------------------------------------- */

static int cg_path(const struct sbx_cgroup *cg, int i, const char *file, char *buf, size_t len)
{
  int n = snprintf(buf, len, "%s/%s%s%s", cg->host->ctrl[i].parent, cg->leaf, file ? "/" : "",
                   file ? file : "");
  return n > 0 && (size_t)n < len ? 0 : -1;
}

static int write_str(const struct sbx_cg_host *h, const char *path, const char *s)
{
  if (sbx_fault(SBX_FAULT_CGROUP_WRITE))
    return -1;
  int fd = open(path, O_WRONLY | O_CLOEXEC | (h->fake ? O_CREAT | O_TRUNC : 0), 0644);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, s, strlen(s));
  int e = errno;
  close(fd);
  errno = e;
  return n == (ssize_t)strlen(s) ? 0 : -1;
}

static ssize_t read_str(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

/* Index of the hierarchy serving controller bit c, or -1. */
static int ctrl_index(const struct sbx_cg_host *h, unsigned c)
{
  for (int i = 0; i < h->nctrl; i++)
    if (h->ctrl[i].mask & c)
      return i;
  return -1;
}

static int write_ctrl(struct sbx_cgroup *cg, unsigned c, const char *file, const char *val,
                      struct sbx_error *err)
{
  int i = ctrl_index(cg->host, c);
  if (i < 0)
    return 0;
  char p[768];
  if (cg_path(cg, i, file, p, sizeof p) < 0 || write_str(cg->host, p, val) < 0)
    return sbx_err_sys(err, errno, "cgroup: write %s=%s", file, val);
  return 0;
}

/* The value of key ("key N" lines) in buf, or buf's number without key. */
static uint64_t parse_u64(const char *buf, const char *key)
{
  if (!key)
    return strtoull(buf, NULL, 10);
  size_t kl = strlen(key);
  for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, key, kl) && l[kl] == ' ')
      return strtoull(l + kl + 1, NULL, 10);
  return 0;
}

static uint64_t read_u64(struct sbx_cgroup *cg, unsigned c, const char *file, const char *key)
{
  int i = ctrl_index(cg->host, c);
  char p[768], buf[4096];
  if (i < 0 || cg_path(cg, i, file, p, sizeof p) < 0 || read_str(p, buf, sizeof buf) <= 0)
    return 0;
  return parse_u64(buf, key);
}

static void sleep_ms(unsigned ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- detection --------------------------------------------------------- */

static char *slurp(const char *path)
{
  FILE *f = fopen(path, "re");
  if (!f)
    return NULL;
  size_t cap = 65536, len = 0;
  char *b = malloc(cap);
  size_t n;
  while (b && (n = fread(b + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *nb = realloc(b, cap *= 2);
      if (!nb) {
        free(b);
        b = NULL;
      }
      b = nb;
    }
  }
  fclose(f);
  if (b)
    b[len] = '\0';
  return b;
}

/* The path of this process in the hierarchy whose /proc/self/cgroup
 * controller list contains ctrl ("" = the v2 line). */
static int self_path(const char *selfcg, const char *ctrl, char *out, size_t len)
{
  const char *l = selfcg;
  while (l && *l) {
    const char *nl = strchr(l, '\n');
    size_t ll = nl ? (size_t)(nl - l) : strlen(l);
    const char *c1 = memchr(l, ':', ll);
    const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - l)) : NULL;
    if (c2) {
      size_t cl = (size_t)(c2 - c1 - 1);
      bool match = false;
      if (!*ctrl)
        match = cl == 0 && !strncmp(l, "0:", 2);
      else
        for (const char *t = c1 + 1; t < c2;) {
          const char *e = memchr(t, ',', (size_t)(c2 - t));
          size_t tl = e ? (size_t)(e - t) : (size_t)(c2 - t);
          match |= tl == strlen(ctrl) && !strncmp(t, ctrl, tl);
          t += tl + 1;
        }
      if (match) {
        size_t pl = ll - (size_t)(c2 + 1 - l);
        if (pl >= len)
          return -1;
        memcpy(out, c2 + 1, pl);
        out[pl] = '\0';
        if (pl == 1 && out[0] == '/')
          out[0] = '\0';
        return 0;
      }
    }
    l = nl ? nl + 1 : NULL;
  }
  return -1;
}

/* Mount point of the v1 hierarchy carrying ctrl (or of cgroup2 if ctrl is
 * ""), from mountinfo. */
static int find_mount(const char *mountinfo, const char *ctrl, char *out, size_t len)
{
  for (const char *l = mountinfo; l && *l;) {
    const char *nl = strchr(l, '\n');
    size_t ll = nl ? (size_t)(nl - l) : strlen(l);
    char line[1024];
    bool fits = ll < sizeof line;
    if (fits) {
      memcpy(line, l, ll);
      line[ll] = '\0';
    }
    l = nl ? nl + 1 : NULL;
    if (!fits)
      continue;
    char mnt[512], fstype[32], opts[512];
    const char *sep = strstr(line, " - ");
    if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
        sscanf(sep + 3, "%31s %*s %511s", fstype, opts) != 2)
      continue;
    bool hit = false;
    if (!*ctrl)
      hit = !strcmp(fstype, "cgroup2");
    else if (!strcmp(fstype, "cgroup"))
      for (char *save = NULL, *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
        hit |= !strcmp(t, ctrl);
    if (hit && strlen(mnt) < len) {
      strcpy(out, mnt);
      return 0;
    }
  }
  return -1;
}

static int add_ctrl(struct sbx_cg_host *h, const char *name, const char *mnt, const char *self,
                    const char *parent_name, unsigned mask)
{
  char dir[512];
  if (snprintf(dir, sizeof dir, "%s%s/%s", mnt, self, parent_name) >= (int)sizeof dir)
    return -1;
  for (int i = 0; i < h->nctrl; i++)
    if (!strcmp(h->ctrl[i].parent, dir)) {
      h->ctrl[i].mask |= mask;
      return 0;
    }
  if (h->nctrl >= (int)(sizeof h->ctrl / sizeof h->ctrl[0]))
    return -1;
  snprintf(h->ctrl[h->nctrl].name, sizeof h->ctrl[0].name, "%s", name);
  snprintf(h->ctrl[h->nctrl].parent, sizeof h->ctrl[0].parent, "%s", dir);
  h->ctrl[h->nctrl++].mask = mask;
  return 0;
}

static int detect_v1(struct sbx_cg_host *h, const char *root, const char *selfcg, const char *mi,
                     const char *parent_name)
{
  for (size_t i = 0; i < sizeof v1_ctrls / sizeof v1_ctrls[0]; i++) {
    char mnt[512], self[512];
    if (self_path(selfcg, v1_ctrls[i].name, self, sizeof self) < 0)
      continue;
    if (root)
      snprintf(mnt, sizeof mnt, "%s/%s", root, v1_ctrls[i].name);
    else if (find_mount(mi, v1_ctrls[i].name, mnt, sizeof mnt) < 0)
      continue;
    if (add_ctrl(h, v1_ctrls[i].name, mnt, self, parent_name, v1_ctrls[i].mask) < 0)
      return -1;
  }
  return ctrl_index(h, SBX_CGC_MEMORY) >= 0 && ctrl_index(h, SBX_CGC_PIDS) >= 0 ? 0 : -1;
}

/* ---- v2 delegation ------------------------------------------------------ */

/* v2 forbids processes in a cgroup whose children have controllers (the
 * "no internal processes" rule), and systemd starts a service in the root
 * of its delegated subtree.  So the daemon takes a leaf of that subtree,
 * <its cgroup>/daemon, moves itself (and any child it already forked, e.g.
 * a probe) there, and enables the controllers in the subtree, where the
 * sandbox parent lives beside it:
 *
 *   sandboxd.service/            memory pids cpu enabled for children
 *     daemon/                    the daemon's processes
 *     sandboxd-<hash>/<leaf>     sandboxes (and -gvisor for runsc's)
 *
 * A cgroup that also holds processes that are not ours (a login shell's
 * scope, another service) is not ours to rearrange: fail closed, naming
 * the fix.  The root cgroup is exempt from the rule: nothing moves. */
#define DAEMON_LEAF "daemon"

static pthread_mutex_t v2_lock = PTHREAD_MUTEX_INITIALIZER;
static char v2_self[512]; /* this process's delegated cgroup, once taken */
static bool v2_taken;

/* Whether pid is this process or a descendant of it (probes forked before
 * the move must come along, or they would pin the subtree). */
static bool is_ours(pid_t pid)
{
  for (int depth = 0; pid > 1 && depth < 16; depth++) {
    if (pid == getpid())
      return true;
    char p[48], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    if (read_str(p, buf, sizeof buf) <= 0)
      return false;
    const char *rp = strrchr(buf, ')'); /* comm may hold spaces and parens */
    int ppid = 0;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
      return false;
    pid = (pid_t)ppid;
  }
  return false;
}

/* Whether a space-separated list (cgroup.controllers) names word. */
static bool has_word(const char *list, const char *word)
{
  size_t n = strlen(word);
  for (const char *t = list; (t = strstr(t, word)); t += n)
    if ((t == list || t[-1] == ' ') && (t[n] == ' ' || t[n] == '\n' || !t[n]))
      return true;
  return false;
}

static int v2_claim(const struct sbx_cg_host *h, const char *base, const char *avail,
                    struct sbx_error *err)
{
  char p[700], procs[65536];
  snprintf(p, sizeof p, "%s/cgroup.procs", base);
  if (read_str(p, procs, sizeof procs) < 0)
    procs[0] = '\0'; /* a fake tree without the file: nothing inside */
  long foreign = 0;
  for (char *t = procs, *e; *t; t = e) {
    long pid = strtol(t, &e, 10);
    if (e == t)
      break;
    if (pid > 0 && !is_ours((pid_t)pid) && !foreign)
      foreign = pid;
    while (*e == '\n')
      e++;
  }
  if (foreign)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                       "cgroup v2: %s also holds processes that are not sandboxd's (pid %ld): "
                       "sandboxd needs a cgroup of its own to delegate from; run it as the "
                       "packaged systemd unit (Delegate=yes) or with `systemd-run --scope -p "
                       "Delegate=yes sandboxd serve`",
                       base, foreign);
  snprintf(p, sizeof p, "%s/" DAEMON_LEAF, base);
  if (mkdir(p, 0755) < 0 && errno != EEXIST)
    return sbx_err_sys(err, errno, "cgroup v2: mkdir %s", p);
  snprintf(p, sizeof p, "%s/" DAEMON_LEAF "/cgroup.procs", base);
  for (char *t = procs, *e; *t; t = e) {
    long pid = strtol(t, &e, 10);
    if (e == t)
      break;
    char v[24];
    snprintf(v, sizeof v, "%ld", pid);
    if (pid > 0 && write_str(h, p, v) < 0 && errno != ESRCH)
      return sbx_err_sys(err, errno, "cgroup v2: moving pid %ld into %s", pid, p);
    while (*e == '\n')
      e++;
  }
  char want[32] = "+memory +pids";
  if (has_word(avail, "cpu"))
    strcat(want, " +cpu");
  snprintf(p, sizeof p, "%s/cgroup.subtree_control", base);
  if (write_str(h, p, want) < 0)
    return sbx_err_sys(err, errno, "cgroup v2: enabling %s in %s", want, p);
  return 0;
}

/* v2 was found when this returns 0; -1: no usable v2 here (try nothing
 * else: v1 was tried first); -2: v2 is there but not usable, err says why. */
static int detect_v2(struct sbx_cg_host *h, const char *root, const char *selfcg, const char *mi,
                     const char *parent_name, struct sbx_error *err)
{
  char mnt[512], self[512], p[1100], buf[512];
  if (self_path(selfcg, "", self, sizeof self) < 0)
    return -1;
  if (root)
    snprintf(mnt, sizeof mnt, "%s", root);
  else if (find_mount(mi, "", mnt, sizeof mnt) < 0)
    return -1;
  pthread_mutex_lock(&v2_lock);
  if (!root && v2_taken) /* moved already: /proc/self/cgroup now says …/daemon */
    snprintf(self, sizeof self, "%s", v2_self);
  snprintf(p, sizeof p, "%s%s/cgroup.controllers", mnt, self);
  int r = 0;
  if (read_str(p, buf, sizeof buf) < 0 || !has_word(buf, "memory") || !has_word(buf, "pids")) {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                "cgroup v2: the memory and pids controllers are not delegated to %s%s "
                "(controllers: %s); run sandboxd as the packaged systemd unit (Delegate=yes) "
                "or give its cgroup those controllers",
                mnt, self[0] ? self : "/", buf[0] ? strtok(buf, "\n") : "none");
    r = -2;
  } else if (self[0] && (root || !v2_taken)) {
    snprintf(p, sizeof p, "%s%s", mnt, self);
    if (v2_claim(h, p, buf, err) < 0)
      r = -2;
    else if (!root) {
      snprintf(v2_self, sizeof v2_self, "%s", self);
      v2_taken = true;
    }
  }
  pthread_mutex_unlock(&v2_lock);
  if (r < 0)
    return r;
  if (add_ctrl(h, "", mnt, self, parent_name,
               SBX_CGC_MEMORY | SBX_CGC_PIDS | SBX_CGC_CPU | SBX_CGC_CPUACCT | SBX_CGC_FREEZER) <
      0)
    return -1;
  return 0;
}

/* The parent cgroup name used when none is given: one per daemon instance
 * (the container driver derives it from the state dir), so a daemon's
 * recovery never touches another daemon's sandboxes. */
static char default_parent[64] = "sandboxd";

void sbx_cg_set_default_parent(const char *name)
{
  snprintf(default_parent, sizeof default_parent, "%s", name);
}

int sbx_cg_detect(struct sbx_cg_host *h, const char *root, const char *self_cgroup,
                  const char *mountinfo, const char *parent_name, struct sbx_error *err)
{
  memset(h, 0, sizeof *h);
  h->fake = root != NULL;
  _cleanup_free_ char *own_self = self_cgroup ? NULL : slurp("/proc/self/cgroup");
  _cleanup_free_ char *own_mi = (mountinfo || root) ? NULL : slurp("/proc/self/mountinfo");
  const char *selfcg = self_cgroup ? self_cgroup : own_self;
  const char *mi = mountinfo ? mountinfo : own_mi;
  if (!parent_name)
    parent_name = default_parent;
  if (!selfcg)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno,
                       "cgroup: cannot read /proc/self/cgroup");
  if (detect_v1(h, root, selfcg, mi, parent_name) == 0) {
    h->version = SBX_CG_V1;
    return 0;
  }
  memset(h->ctrl, 0, sizeof h->ctrl);
  h->nctrl = 0;
  int v2 = detect_v2(h, root, selfcg, mi, parent_name, err);
  if (v2 == 0) {
    h->version = SBX_CG_V2;
    return 0;
  }
  if (v2 == -2)
    return -1;
  return sbx_err_set(
      err, SBX_E_RUNTIME_UNAVAILABLE, 0,
      "cgroup: neither v1 (memory+pids) nor v2 with memory+pids controllers available");
}

/* ---- lifecycle ------------------------------------------------------- */

/* v2: controllers must be enabled on the way down.  The daemon's own
 * cgroup can only delegate them if it holds no processes itself (the
 * "no internal processes" rule) — see docs/cgroups.md. */
static void v2_enable_controllers(const struct sbx_cg_host *h)
{
  /* All at once, else one by one: a kernel or delegation without cpu must
   * not cost the sandboxes their memory and pids limits. */
  static const char *const one[] = {"+memory", "+pids", "+cpu"};
  char p[600];
  for (int level = 0; level < 2; level++) {
    snprintf(p, sizeof p, "%s%s/cgroup.subtree_control", h->ctrl[0].parent,
             level == 0 ? "/.." : "");
    if (write_str(h, p, "+memory +pids +cpu") == 0)
      continue;
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
      if (write_str(h, p, one[i]) < 0)
        sbx_debug("cgroup", "enable %s in %s: %s", one[i], p, strerror(errno));
  }
}

int sbx_cg_create(const struct sbx_cg_host *h, const char *leaf,
                  const struct sbx_iso_limits *lim, struct sbx_cgroup *out,
                  struct sbx_error *err)
{
  memset(out, 0, sizeof *out);
  out->host = h;
  out->v2_dirfd = -1;
  if (!leaf[0] || strchr(leaf, '/') || leaf[0] == '.' || strlen(leaf) >= sizeof out->leaf)
    return sbx_err_field(err, "id", "cgroup: bad leaf name '%s'", leaf);
  snprintf(out->leaf, sizeof out->leaf, "%s", leaf);
  for (int i = 0; i < h->nctrl; i++) {
    char p[768];
    if (mkdir(h->ctrl[i].parent, 0755) < 0 && errno != EEXIST) {
      sbx_err_sys(err, errno, "cgroup: mkdir %s", h->ctrl[i].parent);
      goto fail;
    }
    if (h->version == SBX_CG_V2 && i == 0)
      v2_enable_controllers(h);
    cg_path(out, i, NULL, p, sizeof p);
    if (mkdir(p, 0755) < 0) {
      int e = errno;
      /* undo only what this call made */
      for (int j = 0; j < i; j++) {
        cg_path(out, j, NULL, p, sizeof p);
        rmdir(p);
      }
      return e == EEXIST ? sbx_err_set(err, SBX_E_CONFLICT, e, "cgroup: %s already exists", p)
                         : sbx_err_sys(err, e, "cgroup: mkdir %s", p);
    }
  }
  if (h->version == SBX_CG_V2) {
    char p[768];
    cg_path(out, 0, NULL, p, sizeof p);
    out->v2_dirfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (out->v2_dirfd < 0) {
      sbx_err_sys(err, errno, "cgroup: open %s", p);
      goto fail;
    }
  }
  if (sbx_cg_set_limits(out, lim, err) < 0)
    goto fail;
  return 0;
fail:
  sbx_cg_remove(out, NULL);
  return -1;
}

static int v1_memory(struct sbx_cgroup *cg, uint64_t mem, struct sbx_error *err)
{
  char v[32];
  snprintf(v, sizeof v, mem ? "%llu" : "-1", (unsigned long long)mem);
  int i = ctrl_index(cg->host, SBX_CGC_MEMORY);
  char p[768];
  cg_path(cg, i, "memory.memsw.limit_in_bytes", p, sizeof p);
  bool memsw = cg->host->fake || access(p, F_OK) == 0;
  /* memsw must stay >= the memory limit: lowering goes mem first,
   * raising memsw first.  Try one order, fall back to the other. */
  if (write_ctrl(cg, SBX_CGC_MEMORY, "memory.limit_in_bytes", v, NULL) == 0) {
    if (memsw && write_ctrl(cg, SBX_CGC_MEMORY, "memory.memsw.limit_in_bytes", v, err) < 0)
      return -1;
  } else if (!memsw ||
             write_ctrl(cg, SBX_CGC_MEMORY, "memory.memsw.limit_in_bytes", v, err) < 0 ||
             write_ctrl(cg, SBX_CGC_MEMORY, "memory.limit_in_bytes", v, err) < 0) {
    return sbx_err_prefix(err, "memory limit");
  }
  /* the OOM killer stays on: a paused OOM would hang the sandbox */
  return write_ctrl(cg, SBX_CGC_MEMORY, "memory.oom_control", "0", err);
}

/* Which groups of limits differ from those last written (all of them
 * before the first write). */
struct lim_change {
  bool memory, pids, cpu;
};

static struct lim_change changed(const struct sbx_cgroup *cg, const struct sbx_iso_limits *lim)
{
  if (!cg->set_known)
    return (struct lim_change){true, true, true};
  return (struct lim_change){cg->set.memory_bytes != lim->memory_bytes,
                             cg->set.pids != lim->pids, cg->set.cpu_millis != lim->cpu_millis};
}

/* pids.max, the same file on v1 and v2 (0: no limit). */
static int write_pids(struct sbx_cgroup *cg, uint64_t pids, struct sbx_error *err)
{
  char v[32];
  snprintf(v, sizeof v, pids ? "%llu" : "max", (unsigned long long)pids);
  return write_ctrl(cg, SBX_CGC_PIDS, "pids.max", v, err);
}

static int set_v1(struct sbx_cgroup *cg, const struct sbx_iso_limits *lim, struct lim_change c,
                  struct sbx_error *err)
{
  char v[32];
  if (c.memory && v1_memory(cg, lim->memory_bytes, err) < 0)
    return -1;
  if (c.pids && write_pids(cg, lim->pids, err) < 0)
    return -1;
  if (!c.cpu)
    return 0;
  if (write_ctrl(cg, SBX_CGC_CPU, "cpu.cfs_period_us", "100000", err) < 0)
    return -1;
  snprintf(v, sizeof v, lim->cpu_millis ? "%llu" : "-1",
           (unsigned long long)lim->cpu_millis * 100);
  return write_ctrl(cg, SBX_CGC_CPU, "cpu.cfs_quota_us", v, err);
}

static int set_v2(struct sbx_cgroup *cg, const struct sbx_iso_limits *lim, struct lim_change c,
                  struct sbx_error *err)
{
  char v[48];
  snprintf(v, sizeof v, lim->memory_bytes ? "%llu" : "max",
           (unsigned long long)lim->memory_bytes);
  if (c.memory && (write_ctrl(cg, SBX_CGC_MEMORY, "memory.max", v, err) < 0 ||
                   write_ctrl(cg, SBX_CGC_MEMORY, "memory.swap.max", "0", err) < 0 ||
                   /* 0, as v1 behaves: the OOM killer takes the workload that
                    * grew, not the whole cgroup — with 1 it takes sbx-init too
                    * and a session dies with its command.  The daemon then ends
                    * that exec's tree itself and reports oom_killed
                    * (runtime/sandbox.c). */
                   write_ctrl(cg, SBX_CGC_MEMORY, "memory.oom.group", "0", err) < 0))
    return -1;
  if (c.pids && write_pids(cg, lim->pids, err) < 0)
    return -1;
  if (!c.cpu)
    return 0;
  if (lim->cpu_millis)
    snprintf(v, sizeof v, "%llu 100000", (unsigned long long)lim->cpu_millis * 100);
  else
    snprintf(v, sizeof v, "max 100000");
  return write_ctrl(cg, SBX_CGC_CPU, "cpu.max", v, err);
}

int sbx_cg_set_limits(struct sbx_cgroup *cg, const struct sbx_iso_limits *lim,
                      struct sbx_error *err)
{
  struct lim_change c = changed(cg, lim);
  int r = cg->host->version == SBX_CG_V2 ? set_v2(cg, lim, c, err) : set_v1(cg, lim, c, err);
  /* after a failure part of them may be written: write all next time */
  cg->set_known = r == 0;
  if (r == 0)
    cg->set = *lim;
  return r;
}

int sbx_cg_attach(struct sbx_cgroup *cg, pid_t pid, struct sbx_error *err)
{
  char v[24];
  snprintf(v, sizeof v, "%d", (int)pid);
  for (int i = 0; i < cg->host->nctrl; i++) {
    char p[768];
    cg_path(cg, i, "cgroup.procs", p, sizeof p);
    if (write_str(cg->host, p, v) < 0)
      return sbx_err_sys(err, errno, "cgroup: attach %d to %s", (int)pid, p);
  }
  return 0;
}

int sbx_cg_usage(struct sbx_cgroup *cg, struct sbx_iso_usage *out)
{
  memset(out, 0, sizeof *out);
  if (cg->host->version == SBX_CG_V2) {
    out->cpu_seconds = (double)read_u64(cg, SBX_CGC_CPU, "cpu.stat", "usage_usec") / 1e6;
    out->memory_peak_bytes = read_u64(cg, SBX_CGC_MEMORY, "memory.peak", NULL);
    out->oom_kills = read_u64(cg, SBX_CGC_MEMORY, "memory.events", "oom_kill");
  } else {
    out->cpu_seconds = (double)read_u64(cg, SBX_CGC_CPUACCT, "cpuacct.usage", NULL) / 1e9;
    out->memory_peak_bytes = read_u64(cg, SBX_CGC_MEMORY, "memory.max_usage_in_bytes", NULL);
    out->oom_kills = read_u64(cg, SBX_CGC_MEMORY, "memory.oom_control", "oom_kill");
  }
  out->pids_current = read_u64(cg, SBX_CGC_PIDS, "pids.current", NULL);
  out->pids_max_hits = read_u64(cg, SBX_CGC_PIDS, "pids.events", "max");
  return 0;
}

int sbx_cg_memory(struct sbx_cgroup *cg, uint64_t *current, uint64_t *file)
{
  bool v2 = cg->host->version == SBX_CG_V2;
  *current = read_u64(cg, SBX_CGC_MEMORY, v2 ? "memory.current" : "memory.usage_in_bytes", NULL);
  *file = read_u64(cg, SBX_CGC_MEMORY, "memory.stat", v2 ? "file" : "cache");
  return 0;
}

static const char *oom_file(const struct sbx_cgroup *cg)
{
  return cg->host->version == SBX_CG_V2 ? "memory.events" : "memory.oom_control";
}

/* The OOM counter file's fd, opened on first use: one kernfs path walk per
 * sandbox instead of one per read (16-50 us each on cgroup v1, and two
 * reads bracket every exec).  -1 when it cannot be opened. */
static int oom_fd(struct sbx_cgroup *cg)
{
  int have = __atomic_load_n(&cg->oom_fd1, __ATOMIC_ACQUIRE);
  if (have > 0)
    return have - 1;
  int i = ctrl_index(cg->host, SBX_CGC_MEMORY);
  char p[768];
  if (i < 0 || cg_path(cg, i, oom_file(cg), p, sizeof p) < 0)
    return -1;
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int none = 0;
  if (__atomic_compare_exchange_n(&cg->oom_fd1, &none, fd + 1, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    return fd;
  close(fd); /* another thread opened it first */
  return none - 1;
}

/* The OOM-kill counter alone: one pread of a cgroupfs file kept open,
 * cheap enough to bracket every exec (runtime/sandbox.c). */
int sbx_cg_oom_kills(struct sbx_cgroup *cg, uint64_t *out)
{
  char buf[1024];
  int fd = oom_fd(cg);
  ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
  if (n < 0) {
    *out = read_u64(cg, SBX_CGC_MEMORY, oom_file(cg), "oom_kill");
    return 0;
  }
  buf[n] = '\0';
  *out = parse_u64(buf, "oom_kill");
  return 0;
}

/* ---- kill and remove ------------------------------------------------- */

/* Calls fn for every pid listed in hierarchy i's cgroup.procs; returns
 * how many calls returned true. */
static int each_listed(struct sbx_cgroup *cg, int i, bool (*fn)(pid_t, void *), void *ctx)
{
  char p[768], buf[65536];
  cg_path(cg, i, "cgroup.procs", p, sizeof p);
  if (read_str(p, buf, sizeof buf) <= 0)
    return 0;
  int n = 0;
  for (char *s = buf, *e; *s; s = e) {
    long pid = strtol(s, &e, 10);
    if (e == s)
      break;
    if (pid > 0 && pid <= INT32_MAX && fn((pid_t)pid, ctx))
      n++;
    while (*e == '\n')
      e++;
  }
  return n;
}

static bool kill_one(pid_t pid, void *ctx)
{
  (void)ctx;
  return kill(pid, SIGKILL) == 0;
}

/* SIGKILLs every pid listed in hierarchy i's cgroup.procs; returns how many. */
static int kill_listed(struct sbx_cgroup *cg, int i)
{
  return each_listed(cg, i, kill_one, NULL);
}

int sbx_cg_each_proc(struct sbx_cgroup *cg, bool (*fn)(pid_t pid, void *ctx), void *ctx)
{
  int i = ctrl_index(cg->host, SBX_CGC_PIDS);
  return each_listed(cg, i < 0 ? 0 : i, fn, ctx);
}

static bool is_empty(struct sbx_cgroup *cg)
{
  char p[768], buf[256];
  if (cg->host->version == SBX_CG_V2) {
    cg_path(cg, 0, "cgroup.events", p, sizeof p);
    if (read_str(p, buf, sizeof buf) < 0)
      return true;
    return strstr(buf, "populated 0") != NULL;
  }
  int i = ctrl_index(cg->host, SBX_CGC_PIDS);
  cg_path(cg, i < 0 ? 0 : i, "cgroup.procs", p, sizeof p);
  return read_str(p, buf, sizeof buf) <= 0;
}

static int freeze(struct sbx_cgroup *cg, int fi, const char *state)
{
  char p[768], buf[32];
  cg_path(cg, fi, "freezer.state", p, sizeof p);
  if (write_str(cg->host, p, state) < 0)
    return -1;
  for (int t = 0; t < 1000; t++) {
    if (read_str(p, buf, sizeof buf) < 0 || !strncmp(buf, state, strlen(state)) ||
        cg->host->fake)
      return 0;
    sleep_ms(1);
  }
  errno = ETIMEDOUT;
  return -1;
}

static void kill_v1(struct sbx_cgroup *cg)
{
  int fi = ctrl_index(cg->host, SBX_CGC_FREEZER);
  int pi = ctrl_index(cg->host, SBX_CGC_PIDS);
  if (fi >= 0 && freeze(cg, fi, "FROZEN") == 0) {
    kill_listed(cg, fi);
    freeze(cg, fi, "THAWED");
    return;
  }
  /* No freezer: repeat until nothing new appears. */
  for (int round = 0; round < 100 && kill_listed(cg, pi < 0 ? 0 : pi) > 0; round++)
    ;
}

int sbx_cg_kill(struct sbx_cgroup *cg, unsigned timeout_ms, struct sbx_error *err)
{
  /* Empty: nothing to freeze.  Freezing is not free: on v1 the first
   * frozen cgroup of the host turns a kernel static key on and the last
   * thaw turns it off, each a patch of kernel text synchronised across
   * every CPU (on a VM, the largest cost of a sandbox's teardown). */
  if (!cg->host || !cg->leaf[0] || is_empty(cg))
    return 0;
  if (cg->host->version == SBX_CG_V2) {
    char p[768];
    cg_path(cg, 0, "cgroup.kill", p, sizeof p);
    if (write_str(cg->host, p, "1") < 0) /* < 5.14: no cgroup.kill */
      kill_listed(cg, 0);
  } else {
    kill_v1(cg);
  }
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  unsigned nap = 1;
  while (!is_empty(cg)) {
    if (sbx_now_ms() > deadline)
      return sbx_err_set(err, SBX_E_INTERNAL, ETIMEDOUT, "cgroup: %s not empty after kill",
                         cg->leaf);
    if (cg->host->version == SBX_CG_V1)
      kill_v1(cg);
    sleep_ms(nap);
    nap = nap < 8 ? nap * 2 : nap;
  }
  return 0;
}

int sbx_cg_remove(struct sbx_cgroup *cg, struct sbx_error *err)
{
  int r = 0;
  if (cg->v2_dirfd >= 0) {
    close(cg->v2_dirfd);
    cg->v2_dirfd = -1;
  }
  if (cg->oom_fd1 > 0) {
    close(cg->oom_fd1 - 1);
    cg->oom_fd1 = 0;
  }
  if (!cg->host || !cg->leaf[0])
    return 0;
  for (int i = 0; i < cg->host->nctrl; i++) {
    char p[768];
    cg_path(cg, i, NULL, p, sizeof p);
    int t = 0;
    /* EBUSY for a moment while the last task is released */
    while (rmdir(p) < 0 && errno != ENOENT) {
      if (errno != EBUSY || ++t > 200) {
        r = sbx_err_sys(err, errno, "cgroup: rmdir %s", p);
        break;
      }
      sleep_ms(1);
    }
  }
  return r;
}

int sbx_cg_recover(const struct sbx_cg_host *h)
{
  int count = 0;
  for (int i = 0; i < h->nctrl; i++) {
    DIR *d = opendir(h->ctrl[i].parent);
    if (!d)
      continue;
    struct dirent *de;
    while ((de = readdir(d))) {
      if (de->d_type != DT_DIR || de->d_name[0] == '.' || strlen(de->d_name) >= 96)
        continue;
      struct sbx_cgroup cg = {.host = h, .v2_dirfd = -1};
      memcpy(cg.leaf, de->d_name, strlen(de->d_name) + 1);
      struct sbx_error err = {0};
      if (sbx_cg_kill(&cg, 5000, &err) < 0 || sbx_cg_remove(&cg, &err) < 0)
        sbx_warn("cgroup", "recover %s: %s", cg.leaf, err.msg);
      else
        count++;
    }
    closedir(d);
  }
  return count;
}

void sbx_cg_remove_parents(const struct sbx_cg_host *h)
{
  for (int i = 0; i < h->nctrl; i++)
    if (rmdir(h->ctrl[i].parent) < 0 && errno != ENOENT)
      sbx_debug("cgroup", "rmdir %s: %s", h->ctrl[i].parent, strerror(errno));
}

int sbx_cg_count(const struct sbx_cg_host *h)
{
  if (h->nctrl == 0)
    return -1;
  DIR *d = opendir(h->ctrl[0].parent);
  if (!d)
    return errno == ENOENT ? 0 : -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    n += de->d_type == DT_DIR && de->d_name[0] != '.';
  closedir(d);
  return n;
}
