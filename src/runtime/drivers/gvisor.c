/* gvisor.c — the `gvisor` driver: user-space-kernel isolation.
 *
 * A sandbox is one gVisor container started with `runsc run` on an OCI
 * bundle (gvisor_bundle.c) whose process is our sbx-init, connected to the
 * daemon by a SOCK_SEQPACKET socket passed as the container's stdin
 * (sbx-init --chan-fd 0): an exec in a live session is a message and a
 * fork inside gVisor, never a `runsc exec`.
 *
 * Limits wrap runsc (gVisor promises nothing about exhaustion): each
 * sandbox gets a cgroup (memory, pids, cpu) under this daemon's own gvisor
 * parent, and `runsc run` joins it before it execs, so the sandbox
 * process, the gofer and every ptrace stub are inside.  destroy() closes
 * the channel (sbx-init then kills everything and exits), freezer-kills
 * the cgroup, reaps, runs `runsc delete --force`, removes the cgroup and
 * the bundle.
 *
 * Fail closed: runsc missing, not executable or failing a start probe →
 * unavailable with the reason; any create failure → nothing left behind
 * and SBX_E_RUNTIME_UNAVAILABLE carrying runsc's first error line.
 *
 * gVisor cannot send file descriptors from the sandbox out to the host
 * (its host-socket endpoint rejects SCM_RIGHTS with EINVAL).  sbx-init
 * finds that out when it says READY (init/proto.h) and the sandbox is
 * marked fd_in: the sandbox client then passes every fd *in* and sbx-init
 * moves the bytes (files, archives, terminals, ports, watch).
 *
 * Images (issue 7): the bundle's rootfs is then an overlayfs of the
 * image's layers that the daemon mounts on the host (gvisor_bundle.c);
 * teardown and recovery unmount it before anything is removed.  Image
 * sandboxes always start cold: the pool holds host-pack sandboxes only.
 *
 * Egress allowlists: runsc --network=sandbox hands the
 * interfaces of the netns the bundle names to gVisor's netstack, copying
 * addresses and routes once, at start.  So an allowlisted sandbox gets a
 * netns first (a holder process, gvisor_proc.c), the core links it
 * (spec.net_prepare → sbx_net_attach), and only then runsc starts in it.
 * Such sandboxes start cold (the pool's have network none) and cannot
 * gain a link later (the core answers 409).  The nft rules, DNS responder
 * and proxy outside are the same as for the container driver. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "init/launch.h"
#include "init/proto.h"
#include "runtime/drivers/cg_spawn.h"
#include "runtime/drivers/gvisor_int.h"
#include "runtime/drivers/iso_limits.h"
#include "runtime/drivers/warm_pool.h"

#define HANDSHAKE_MS 20000 /* runsc start is 0.3–1 s here; loaded CI hosts are slower */
#define RUNSC_CMD_MS 10000 /* bound of one runsc kill/delete/probe */
#define KVM_PROBE_MS 2000  /* a working KVM probe takes ~0.3 s; a hung one never ends */
#define DEFAULT_DISK (256ull << 20)
#define PIDS_OVERHEAD 256 /* host tasks of gVisor itself (see build) */
#define PIDS_PER_TASK 32
#define POOL_IDLE_MEMORY (256ull << 20) /* until the hand-over sets the request's */
#define GRACE_MS 1000                   /* for runsc to end by itself once sbx-init exits */

static struct {
  bool ready;
  char runsc[PATH_MAX];
  char platform[16];
  char init_path[PATH_MAX];
  char dir[PATH_MAX];        /* <state_dir>/gvisor: one bundle dir per sandbox */
  char runsc_root[PATH_MAX]; /* <state_dir>/gvisor-runsc: runsc's own state */
  char describe[PATH_MAX + 64];
  char note[256]; /* why this platform (a KVM probe that hung, …) */
  struct sbx_cg_host cg;
} gv;

static int build_pooled(const char *rid, const struct sbx_limits *key, void **pv, int *chan,
                        struct sbx_error *err);
static void drop(void *pv, int chan);
/* Host-pack sandboxes only, as the sandbox user (gvisor_create), keyed by
 * disk and pids: the tmpfs sizes and RLIMIT_NPROC are fixed at start. */
static struct sbx_warm_pool pool = SBX_WARM_POOL_INIT("gvisor", "gvp_");

/* ---- probe ------------------------------------------------------------ */

static int find_runsc(const char *want, char *out, size_t outlen)
{
  if (!want || !*want)
    want = "runsc";
  if (strchr(want, '/')) {
    snprintf(out, outlen, "%s", want);
    return access(out, X_OK);
  }
  const char *path = getenv("PATH") ? getenv("PATH") : "/usr/sbin:/usr/bin:/sbin:/bin";
  _cleanup_free_ char *copy = strdup(path);
  for (char *save = NULL, *d = copy ? strtok_r(copy, ":", &save) : NULL; d;
       d = strtok_r(NULL, ":", &save)) {
    snprintf(out, outlen, "%s/%s", d, want);
    if (access(out, X_OK) == 0)
      return 0;
  }
  snprintf(out, outlen, "%s", want);
  errno = ENOENT;
  return -1;
}

/* ---- start probes ------------------------------------------------------ *
 *
 * The daemon already serves while this runs (core/profile.h), but the
 * probe must still end: on some hosts /dev/kvm opens and runsc's KVM
 * platform then hangs forever (Debian's 2022 runsc under nested
 * virtualisation).  So each probe command runs in a cgroup of its own
 * under this daemon's gvisor parent, bounded in time: a late one is killed
 * with its whole tree (runsc, gofer, sandbox).  It is started by the
 * spawner thread with PR_SET_PDEATHSIG, and runsc's gofer and sandbox die
 * with runsc, so a daemon killed mid-probe leaves nothing running.  Its
 * TMPDIR (where `runsc do` keeps a bundle, left behind by a killed runsc)
 * is a directory of its own, removed after the probe. */

enum { PROBE_OK = 0, PROBE_FAILED = -1, PROBE_LATE = -2, PROBE_CANCELLED = -3 };

static bool cancelled(const struct sbx_driver_env *env)
{
  return env->cancel && atomic_load(env->cancel);
}

/* Waits for pid within timeout_ms (or until cancelled); its wait status. */
static int wait_bounded(pid_t pid, unsigned timeout_ms, const struct sbx_driver_env *env,
                        int *status)
{
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  unsigned nap = 1;
  for (;;) {
    pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid)
      return PROBE_OK;
    if (w < 0 && errno != EINTR)
      return PROBE_FAILED;
    if (cancelled(env))
      return PROBE_CANCELLED;
    if (sbx_now_ms() >= deadline)
      return PROBE_LATE;
    usleep(nap * 1000);
    nap = nap < 16 ? nap * 2 : nap;
  }
}

/* Runs one probe command (tag names its cgroup); its output in out_fd.
 * PROBE_OK with the wait status in *status, or another PROBE_*; msg says
 * why it could not run. */
static int probe_run(char *const argv[], const char *tag, unsigned timeout_ms,
                     const struct sbx_driver_env *env, int out_fd, int *status, char *msg,
                     size_t msglen)
{
  struct sbx_error err = {0};
  struct sbx_cgroup cg = {.v2_dirfd = -1};
  struct sbx_iso_limits none = {0};
  char leaf[64], tmp[PATH_MAX], tmpenv[PATH_MAX + 8];
  /* unique across runs: a killed daemon's leftover (recovery removes it
   * later) never makes this one fail */
  snprintf(leaf, sizeof leaf, "probe-%d-%llu-%s", (int)getpid(),
           (unsigned long long)(sbx_now_ms() % 100000000), tag);
  /* Not under the state dir: runsc's sandbox cannot reach its bundle
   * through a 0700 parent (it fails "waiting for sandbox to start"). */
  snprintf(tmp, sizeof tmp, "/tmp/sandboxd-probe-%d-%s-XXXXXX", (int)getpid(), tag);
  msg[0] = '\0';
  if (!mkdtemp(tmp)) {
    snprintf(msg, msglen, "mkdtemp %s: %s", tmp, strerror(errno));
    return PROBE_FAILED;
  }
  snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmp);
  char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", tmpenv, NULL};
  if (sbx_cg_create(&gv.cg, leaf, &none, &cg, &err) < 0) {
    snprintf(msg, msglen, "%s", err.msg);
    sbx_rm_rf(tmp);
    return PROBE_FAILED;
  }
  _cleanup_close_ int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = 0;
  int rc = PROBE_FAILED;
  if (null_fd < 0 || sbx_gv_spawn_env(argv, envp, null_fd, out_fd, &cg, &pid, &err) < 0)
    snprintf(msg, msglen, "%s", err.msg[0] ? err.msg : strerror(errno));
  else
    rc = wait_bounded(pid, timeout_ms, env, status);
  /* Late, or a sandbox that outlived runsc: the whole tree goes at once. */
  if (sbx_cg_kill(&cg, 5000, &err) < 0)
    sbx_warn("gvisor", "probe %s: %s", tag, err.msg);
  if (rc != PROBE_OK && pid > 0 && sbx_cg_spawn_reap(pid, 5000, true) < 0)
    sbx_warn("gvisor", "probe %s: runsc %d not reaped", tag, (int)pid);
  if (sbx_cg_remove(&cg, &err) < 0)
    sbx_warn("gvisor", "probe %s: %s", tag, err.msg);
  sbx_rm_rf(tmp);
  return rc;
}

/* The TMPDIRs of probes a killed daemon could not remove (its pid gone). */
static void sweep_probe_tmp(void)
{
  DIR *d = opendir("/tmp");
  struct dirent *de;
  while (d && (de = readdir(d))) {
    int pid = 0;
    if (sscanf(de->d_name, "sandboxd-probe-%d-", &pid) != 1 || pid <= 0 || kill(pid, 0) == 0 ||
        errno != ESRCH)
      continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/tmp/%s", de->d_name);
    sbx_rm_rf(p);
  }
  if (d)
    closedir(d);
}

/* Does this runsc know the systrap platform (2023+)?  Its flag help says. */
static bool knows_systrap(const struct sbx_driver_env *env)
{
  _cleanup_close_ int out = memfd_create("runsc-flags", MFD_CLOEXEC);
  char *argv[] = {gv.runsc, "flags", NULL};
  char msg[256];
  int st = 0;
  if (out < 0 || probe_run(argv, "flags", RUNSC_CMD_MS, env, out, &st, msg, sizeof msg) != 0)
    return false;
  FILE *f = fdopen(dup(out), "r");
  bool yes = false;
  char buf[512];
  if (f)
    rewind(f);
  while (f && fgets(buf, sizeof buf, f))
    yes |= strstr(buf, "systrap") != NULL;
  if (f)
    fclose(f);
  return yes;
}

/* `runsc do true` on platform p: proves runsc can build a sandbox here
 * (namespaces, ptrace/kvm, gofer) before any profile says "available".
 * A PROBE_* code; why says what went wrong. */
static int start_probe(const char *p, unsigned timeout_ms, const struct sbx_driver_env *env,
                       char *why, size_t whylen)
{
  char rootarg[PATH_MAX + 16], platarg[32], msg[256];
  snprintf(rootarg, sizeof rootarg, "--root=%s/probe", gv.runsc_root);
  snprintf(platarg, sizeof platarg, "--platform=%s", p);
  char *argv[] = {gv.runsc, rootarg, platarg, "--network=none", "do", "true", NULL};
  _cleanup_close_ int out = memfd_create("runsc-probe", MFD_CLOEXEC);
  if (out < 0) {
    snprintf(why, whylen, "memfd: %s", strerror(errno));
    return PROBE_FAILED;
  }
  int st = 0;
  int rc = probe_run(argv, p, timeout_ms, env, out, &st, msg, sizeof msg);
  if (rc == PROBE_OK && WIFEXITED(st) && WEXITSTATUS(st) == 0)
    return PROBE_OK;
  if (rc == PROBE_OK) {
    sbx_gv_first_line_fd(out, msg, sizeof msg);
    rc = PROBE_FAILED;
  }
  sbx_rm_rf(rootarg + strlen("--root=")); /* the state of a runsc that did not finish */
  if (rc == PROBE_LATE)
    snprintf(why, whylen, "runsc start probe (platform %s) timed out after %u s", p,
             (timeout_ms + 999) / 1000);
  else if (rc == PROBE_CANCELLED)
    snprintf(why, whylen, "runsc start probe (platform %s) cancelled: the daemon is stopping",
             p);
  else
    snprintf(why, whylen, "runsc start probe (platform %s) failed: %s", p,
             msg[0] ? msg : "no error output");
  return rc;
}

/* KVM when it works here, else systrap or ptrace; gv.note says why not
 * KVM when /dev/kvm was there to try. */
static int choose_platform(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  unsigned probe_ms = env->probe_timeout_ms ? env->probe_timeout_ms : RUNSC_CMD_MS;
  unsigned kvm_ms = env->kvm_probe_timeout_ms ? env->kvm_probe_timeout_ms : KVM_PROBE_MS;
  gv.note[0] = '\0';
  sweep_probe_tmp();
  const char *forced = sbx_driver_setting(env, "gvisor_platform");
  if (forced && *forced) {
    snprintf(gv.platform, sizeof gv.platform, "%s", forced);
    snprintf(gv.note, sizeof gv.note, "set by gvisor_platform (SANDBOXD_GVISOR_PLATFORM)");
    return start_probe(gv.platform, probe_ms, env, why, whylen) == PROBE_OK ? 0 : -1;
  }
  char kvm_why[256] = "";
  if (env->kvm_off)
    snprintf(gv.note, sizeof gv.note, "kvm not tried (gvisor_kvm = off)");
  else if (access("/dev/kvm", R_OK | W_OK) < 0)
    snprintf(gv.note, sizeof gv.note, "no usable /dev/kvm (%s)", strerror(errno));
  else {
    int rc = start_probe("kvm", kvm_ms, env, kvm_why, sizeof kvm_why);
    if (rc == PROBE_OK) {
      snprintf(gv.platform, sizeof gv.platform, "kvm");
      return 0;
    }
    if (rc == PROBE_CANCELLED) {
      snprintf(why, whylen, "%s", kvm_why);
      return -1;
    }
    if (rc == PROBE_LATE)
      snprintf(gv.note, sizeof gv.note, "kvm probe timed out after %u s", (kvm_ms + 999) / 1000);
    else
      snprintf(gv.note, sizeof gv.note, "kvm probe failed: %.200s", kvm_why);
    sbx_info("gvisor", "%s; falling back", gv.note);
  }
  snprintf(gv.platform, sizeof gv.platform, "%s", knows_systrap(env) ? "systrap" : "ptrace");
  return start_probe(gv.platform, probe_ms, env, why, whylen) == PROBE_OK ? 0 : -1;
}

/* Same naming as the container driver (one parent per state dir) plus
 * "-gvisor", so neither driver's recovery touches the other's cgroups. */
static int setup_cgroups(const struct sbx_driver_env *env, struct sbx_error *err)
{
  const char *state_dir = env->state_dir;
  unsigned char h[8];
  char name[48], hex[17];
  crypto_generichash(h, sizeof h, (const unsigned char *)state_dir, strlen(state_dir), NULL, 0);
  sbx_hex(h, sizeof h, hex);
  snprintf(name, sizeof name, "sandboxd-%s-gvisor", hex);
  const char *parent = sbx_driver_setting(env, "cgroup_parent");
  char given[96];
  if (parent && *parent) {
    snprintf(given, sizeof given, "%s-gvisor", parent);
    return sbx_cg_detect(&gv.cg, NULL, NULL, NULL, given, err);
  }
  return sbx_cg_detect(&gv.cg, NULL, NULL, NULL, name, err);
}

static int gvisor_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  struct sbx_error err = {0};
  gv.ready = false;
  if (!env || !env->init_path || !env->state_dir) {
    snprintf(why, whylen, "no sbx-init path or state dir");
    return -1;
  }
  if (find_runsc(env->runsc_path, gv.runsc, sizeof gv.runsc) < 0) {
    snprintf(why, whylen, "runsc not found or not executable (%s): %s", gv.runsc,
             strerror(errno));
    return -1;
  }
  if (geteuid() != 0) {
    snprintf(why, whylen, "the gvisor driver needs a root daemon (runsc, cgroups)");
    return -1;
  }
  snprintf(gv.init_path, sizeof gv.init_path, "%s", env->init_path);
  snprintf(gv.dir, sizeof gv.dir, "%s/gvisor", env->state_dir);
  snprintf(gv.runsc_root, sizeof gv.runsc_root, "%s/gvisor-runsc", env->state_dir);
  if (sbx_mkdir_p(gv.dir, 0700) < 0 || sbx_mkdir_p(gv.runsc_root, 0700) < 0) {
    snprintf(why, whylen, "mkdir %s: %s", gv.dir, strerror(errno));
    return -1;
  }
  /* fail closed here, not at each create, where runsc cannot be told the
   * sandbox's cgroup (see sbx_gv_cgroups_path) */
  struct sbx_cgroup any = {.host = &gv.cg, .leaf = "x"};
  char cgpath[640];
  if (setup_cgroups(env, &err) < 0 ||
      sbx_gv_cgroups_path(&any, cgpath, sizeof cgpath, &err) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  if (choose_platform(env, why, whylen) < 0)
    return -1;
  snprintf(gv.describe, sizeof gv.describe, "%s", gv.platform);
  sbx_overlay_set_form(sbx_driver_setting(env, "overlay_layers"));
  sbx_warm_pool_start(&pool, build_pooled, drop,
                      sbx_driver_setting_uint(env, "gvisor_pool_size", 1, SBX_WARM_POOL_MAX));
  gv.ready = true;
  sbx_info("gvisor", "runsc %s, platform %s", gv.runsc, gv.platform);
  return 0;
}

static const char *gvisor_describe(void) { return gv.ready ? gv.describe : NULL; }

static const char *gvisor_note(void) { return gv.ready ? gv.note : NULL; }

/* ---- teardown --------------------------------------------------------- */

/* `runsc delete --force`, then whatever runsc left in its root for id. */
static void runsc_forget(const char *id)
{
  char rootarg[PATH_MAX + 16], platarg[32], msg[256];
  snprintf(rootarg, sizeof rootarg, "--root=%s", gv.runsc_root);
  snprintf(platarg, sizeof platarg, "--platform=%s", gv.platform);
  char *argv[] = {gv.runsc, rootarg, platarg, "delete", "--force", (char *)id, NULL};
  sbx_gv_run(argv, RUNSC_CMD_MS, msg, sizeof msg);
  DIR *d = opendir(gv.runsc_root);
  struct dirent *de;
  size_t n = strlen(id);
  while (d && (de = readdir(d)))
    if (!strncmp(de->d_name, id, n) && (de->d_name[n] == '_' || de->d_name[n] == '.')) {
      char p[PATH_MAX + 300];
      snprintf(p, sizeof p, "%s/%s", gv.runsc_root, de->d_name);
      sbx_rm_rf(p);
    }
  if (d)
    closedir(d);
}

static void teardown(struct sbx_gv_priv *pv, bool graceful)
{
  const char *id = pv->rid;
  struct sbx_error err = {0};
  /* The channel is closed: sbx-init kills its tree and exits, and runsc
   * tears the sandbox down by itself, usually within ~100 ms.  Freezing
   * ptrace'd tasks instead can take the freezer its whole timeout. */
  uint64_t t0 = sbx_now_ms();
  if (graceful && pv->runsc_pid > 0 && sbx_cg_spawn_reap(pv->runsc_pid, GRACE_MS, false) == 0)
    pv->runsc_pid = 0;
  uint64_t t1 = sbx_now_ms();
  /* Everything runsc started is in the cgroup: one freezer kill. */
  if (sbx_cg_kill(&pv->cg, 5000, &err) < 0)
    sbx_warn("gvisor", "%s: %s", id, err.msg);
  if (pv->runsc_pid > 0 && sbx_cg_spawn_reap(pv->runsc_pid, 5000, true) < 0)
    sbx_warn("gvisor", "%s: runsc %d not reaped", id, (int)pv->runsc_pid);
  pv->runsc_pid = 0;
  sbx_cg_netns_release(&pv->holder_pid, &pv->holder_fd); /* its netns (and veth end) go */
  uint64_t t2 = sbx_now_ms();
  runsc_forget(id);
  sbx_cg_kill(&pv->cg, 2000, NULL);
  if (sbx_cg_remove(&pv->cg, &err) < 0)
    sbx_warn("gvisor", "%s: %s", id, err.msg);
  /* An image's overlay first (runsc, whose gofer served it, is gone):
   * never remove a bundle with something still mounted in it. */
  if (pv->bundle[0] && sbx_gv_bundle_unmount(pv->bundle) < 0)
    sbx_warn("gvisor", "%s: unmounting %s/rootfs: %s; leaving the bundle", id, pv->bundle,
             strerror(errno));
  else if (pv->bundle[0] && sbx_rm_rf(pv->bundle) < 0 && errno != ENOENT)
    sbx_warn("gvisor", "%s: rm %s: %s", id, pv->bundle, strerror(errno));
  sbx_debug("gvisor", "%s down: exit %llu ms, kill %llu ms, cleanup %llu ms", id,
            (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1),
            (unsigned long long)(sbx_now_ms() - t2));
}

/* ---- create ----------------------------------------------------------- */

static int start_runsc(struct sbx_gv_priv *pv, const char *id, int far_end, bool networked,
                       struct sbx_error *err)
{
  char log[PATH_MAX + 16], rootarg[PATH_MAX + 16], platarg[32], bundle[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/runsc.log", pv->bundle);
  snprintf(rootarg, sizeof rootarg, "--root=%s", gv.runsc_root);
  snprintf(platarg, sizeof platarg, "--platform=%s", gv.platform);
  snprintf(bundle, sizeof bundle, "--bundle=%s", pv->bundle);
  /* sandbox: gVisor's netstack takes over the interfaces (the veth) of the
   * netns config.json names; none: only its own loopback */
  char *argv[] = {gv.runsc,   rootarg,
                  platarg,    networked ? "--network=sandbox" : "--network=none",
                  "run",      bundle,
                  (char *)id, NULL};
  _cleanup_close_ int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0)
    return sbx_err_sys(err, errno, "gvisor: open %s", log);
  return sbx_gv_spawn(argv, far_end, log_fd, &pv->cg, networked, &pv->runsc_pid, err);
}

/* runsc's own words when the sandbox did not come up. */
static void explain(struct sbx_gv_priv *pv, struct sbx_error *err)
{
  char log[PATH_MAX + 16], line[200];
  snprintf(log, sizeof log, "%s/runsc.log", pv->bundle);
  sbx_gv_first_line(log, line, sizeof line);
  err->code = SBX_E_RUNTIME_UNAVAILABLE;
  size_t n = strlen(err->msg);
  if (line[0] && n + 16 < sizeof err->msg)
    snprintf(err->msg + n, sizeof err->msg - n, " (runsc: %s)", line);
}

/* The host cgroup's limits for a request: its own, except pids.  The
 * host cgroup also counts gVisor's own tasks: the sentry's Go threads
 * (~50 idle) and, on ptrace, ~22 host tasks per sandbox process (a stub
 * plus the sentry threads locked to trace it; measured).  The request's
 * pids limit goes to gVisor as RLIMIT_NPROC (bundle); the cgroup gets room
 * for gVisor on top, still a hard ceiling for the host. */
static struct sbx_iso_limits host_limits(const struct sbx_limits *req, uint64_t disk)
{
  struct sbx_iso_limits lim = sbx_drv_iso_limits(req);
  lim.disk_bytes = disk;
  if (lim.pids)
    lim.pids = PIDS_PER_TASK * lim.pids + PIDS_OVERHEAD;
  return lim;
}

static int start_one(struct sbx_gv_priv *pv, const struct sbx_limits *lim,
                     const struct sbx_gv_image *img, const struct sbx_gv_net *net, int *chan_out,
                     struct sbx_error *err)
{
  struct sbx_iso_limits hl = host_limits(lim, lim->disk_bytes);
  if (sbx_cg_create(&gv.cg, pv->rid, &hl, &pv->cg, err) < 0) {
    memset(&pv->cg, 0, sizeof pv->cg); /* not ours (EEXIST) or already undone */
    pv->cg.v2_dirfd = -1;
    return -1;
  }
  /* An allowlist: the netns exists and is linked before runsc starts,
   * since runsc copies its interfaces, addresses and routes at start. */
  char netns[64];
  if (net) {
    if (sbx_cg_netns_hold(&pv->cg, &pv->holder_pid, &pv->holder_fd, err) < 0)
      return -1;
    snprintf(netns, sizeof netns, "/proc/%d/ns/net", (int)pv->holder_pid);
    if (net->prepare(net->ctx, pv->holder_pid, err) < 0)
      return -1;
  }
  char cgpath[640];
  if (sbx_gv_cgroups_path(&pv->cg, cgpath, sizeof cgpath, err) < 0)
    return -1;
  snprintf(pv->bundle, sizeof pv->bundle, "%s/%s", gv.dir, pv->rid);
  if (sbx_gv_bundle_write(pv->bundle, gv.init_path, lim->disk_bytes, lim->pids, img,
                          net ? netns : NULL, net ? net->resolv_conf : NULL, cgpath, err) < 0) {
    if (err->errnum == EEXIST)
      pv->bundle[0] = '\0'; /* someone else's dir: leave it alone */
    return -1;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_err_sys(err, errno, "gvisor: socketpair");
  _cleanup_close_ int mine = sv[0], far = sv[1];
  if (start_runsc(pv, pv->rid, far, net != NULL, err) < 0)
    return -1;
  close(steal_fd(&far)); /* EOF reaches us if runsc dies before READY */
  uint32_t flags = 0;
  if (sbx_init_handshake_ex(mine, HANDSHAKE_MS, &flags, err) < 0) {
    explain(pv, err);
    return -1;
  }
  pv->fd_in = (flags & SBX_PROTO_READY_FDIN) != 0;
  *chan_out = steal_fd(&mine);
  return 0;
}

/* Builds one sandbox (img NULL: the host pack); on failure nothing of it
 * is left. */
static int build(const char *rid, const struct sbx_limits *lim, const struct sbx_gv_image *img,
                 const struct sbx_gv_net *net, struct sbx_gv_priv **out, int *chan_out,
                 struct sbx_error *err)
{
  struct sbx_gv_priv *pv = calloc(1, sizeof *pv);
  if (!pv)
    return sbx_err_sys(err, ENOMEM, "gvisor");
  pv->cg.v2_dirfd = -1;
  pv->holder_fd = -1;
  snprintf(pv->rid, sizeof pv->rid, "%s", rid);
  uint64_t t0 = sbx_now_ms();
  if (start_one(pv, lim, img, net, chan_out, err) < 0) {
    sbx_err_prefix(err, "gvisor %s", rid);
    teardown(pv, false);
    free(pv);
    return -1;
  }
  sbx_debug("gvisor", "%s up in %llu ms", rid, (unsigned long long)(sbx_now_ms() - t0));
  *out = pv;
  return 0;
}

/* Pool entries start with the key's limits (memory/cpu: unlimited until
 * the hand-over sets the request's; nothing but sbx-init runs before). */
static int build_pooled(const char *rid, const struct sbx_limits *key, void **pv, int *chan,
                        struct sbx_error *err)
{
  struct sbx_limits lim = {.disk_bytes = key->disk_bytes,
                           .pids = key->pids,
                           .memory_bytes = POOL_IDLE_MEMORY};
  return build(rid, &lim, NULL, NULL, (struct sbx_gv_priv **)pv, chan, err);
}

static void drop(void *pv, int chan)
{
  if (chan >= 0)
    close(chan);
  teardown(pv, true);
  free(pv);
}

/* A pooled sandbox with the request's limits applied, or NULL. */
static struct sbx_gv_priv *take_pooled(const struct sbx_sandbox_spec *spec, uint64_t disk,
                                       int *chan)
{
  void *got;
  struct sbx_limits key = {.disk_bytes = disk, .pids = spec->limits.pids};
  if (!sbx_warm_pool_take(&pool, spec->profile ? spec->profile : "", &key, &got, chan))
    return NULL;
  struct sbx_gv_priv *pv = got;
  struct sbx_error err = {0};
  struct sbx_iso_limits hl = host_limits(&spec->limits, disk);
  if (sbx_cg_set_limits(&pv->cg, &hl, &err) < 0) {
    sbx_warn("gvisor", "pooled sandbox rejected the limits (%s); starting cold", err.msg);
    drop(pv, *chan);
    *chan = -1;
    return NULL;
  }
  return pv;
}

static int gvisor_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                         struct sbx_error *err)
{
  *out = NULL;
  if (!gv.ready)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "gvisor driver not probed/available");
  /* An image reference must come with its layers (the core resolves it);
   * never the host pack in its place. */
  bool named = spec->image && *spec->image && strcmp(spec->image, "host") != 0;
  if ((named || spec->nlayers) &&
      (!spec->layers || spec->nlayers == 0 || spec->nlayers > SBX_GV_MAX_LAYERS))
    return sbx_err_field(err, "image", "image '%s' has no usable layers (%zu; 1 to %d)",
                         spec->image ? spec->image : "", spec->nlayers, SBX_GV_MAX_LAYERS);
  struct sbx_gv_image img = {.layers = spec->layers,
                             .nlayers = spec->nlayers,
                             .run_uid = spec->run_uid,
                             .run_gid = spec->run_gid};
  bool image = spec->nlayers > 0;
  uint64_t disk = spec->limits.disk_bytes ? spec->limits.disk_bytes : DEFAULT_DISK;
  struct sbx_sandbox *sb = sbx_sandbox_alloc(&sbx_drv_gvisor, spec);
  if (!sb)
    return sbx_err_sys(err, ENOMEM, "gvisor");
  int chan = -1;
  struct sbx_gv_net net = {.prepare = spec->net_prepare,
                           .ctx = spec->net_ctx,
                           .resolv_conf = spec->net_resolv_conf};
  bool networked = spec->net_prepare != NULL;
  /* Images (and their User) always start cold: a pooled sandbox is the
   * host pack, as the sandbox user.  So do allowlisted ones: a pooled
   * sandbox has network none, and its netns cannot be swapped after start. */
  struct sbx_gv_priv *pv =
      image || spec->run_uid || networked ? NULL : take_pooled(spec, disk, &chan);
  if (!pv) {
    struct sbx_limits lim = spec->limits;
    lim.disk_bytes = disk;
    if (build(spec->id, &lim, image ? &img : NULL, networked ? &net : NULL, &pv, &chan, err) <
        0) {
      sbx_sandbox_free(sb);
      return -1;
    }
  }
  sb->init_fd = chan;
  sb->init_pid = pv->runsc_pid;
  sb->fd_in = pv->fd_in;
  sb->spool_dir = strdup(pv->bundle); /* NULL → /dev/shm: fine */
  sb->limits.disk_bytes = disk;
  snprintf(sb->root_desc, sizeof sb->root_desc, "/ (gvisor %.50s)", pv->rid);
  sb->priv = pv;
  *out = sb;
  return 0;
}

static void gvisor_prewarm(const char *profile, const struct sbx_limits *limits)
{
  if (gv.ready)
    sbx_warm_pool_want(&pool, profile,
                       &(struct sbx_limits){.disk_bytes = limits->disk_bytes ? limits->disk_bytes
                                                                             : DEFAULT_DISK,
                                            .pids = limits->pids});
}

static unsigned gvisor_pool_idle(const char *profile, const struct sbx_limits *limits)
{
  (void)limits; /* a profile's keys differ only by what prewarm gave */
  return gv.ready ? sbx_warm_pool_idle(&pool, profile) : 0;
}

static void gvisor_destroy(struct sbx_sandbox *sb)
{
  if (!sb)
    return;
  struct sbx_gv_priv *pv = sb->priv;
  /* EOF on its channel: sbx-init kills everything it started and exits,
   * which ends the container; the cgroup kill below is the guarantee. */
  if (sb->init_fd >= 0) {
    close(sb->init_fd);
    sb->init_fd = -1;
  }
  if (pv) {
    teardown(pv, true);
    free(pv);
  }
  sb->priv = NULL;
  sbx_sandbox_free(sb);
}

static int gvisor_usage(struct sbx_sandbox *sb, struct sbx_usage *out)
{
  struct sbx_gv_priv *pv = sb->priv;
  if (!pv)
    return -1;
  return sbx_drv_cg_usage(&pv->cg, out);
}

/* The host cgroup around runsc: the Sentry's memory, which holds the
 * workload's. */
static int gvisor_memory(struct sbx_sandbox *sb, struct sbx_memory *out)
{
  struct sbx_gv_priv *pv = sb->priv;
  if (!pv)
    return -1;
  return sbx_drv_cg_memory(&pv->cg, out);
}

/* The host cgroup around runsc: the Sentry, which maps the workload's
 * memory, is what its OOM killer takes. */
static int gvisor_oom_kills(struct sbx_sandbox *sb, uint64_t *out)
{
  struct sbx_gv_priv *pv = sb->priv;
  if (!pv)
    return -1;
  return sbx_cg_oom_kills(&pv->cg, out);
}

/* ---- recover ---------------------------------------------------------- */

static int gvisor_recover(const struct sbx_driver_env *env)
{
  (void)env;
  if (!gv.ready)
    return 0;
  int n = sbx_cg_recover(&gv.cg); /* every runsc of a previous run dies here */
  DIR *d = opendir(gv.dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", gv.dir, de->d_name);
    runsc_forget(de->d_name);
    /* an image sandbox's overlay outlives a killed daemon: unmount first */
    if (sbx_gv_bundle_unmount(p) < 0)
      sbx_warn("gvisor", "recovery: unmounting %s/rootfs: %s; leaving it", p, strerror(errno));
    else if (sbx_rm_rf(p) == 0)
      n++;
  }
  if (d)
    closedir(d);
  return n;
}

/* Sessions are gone by now (core shuts them down first): drop this
 * daemon's empty cgroup parents so they do not pile up across runs. */
static void gvisor_shutdown(void)
{
  if (!gv.ready)
    return;
  sbx_warm_pool_stop(&pool);
  sbx_cg_remove_parents(&gv.cg);
}

const struct sbx_driver sbx_drv_gvisor = {
    .abi = SBX_DRIVER_ABI,
    .name = "gvisor",
    .klass = "user-space-kernel",
    /* all through the fd-in forms (see the top); egress allowlists with
     * the link made before runsc starts (spec.net_prepare); OCI images as
     * copy-on-write overlays (gvisor_bundle.c) */
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_TERMINAL | SBX_CAP_WATCH | SBX_CAP_UPSTREAM |
            SBX_CAP_ARCHIVE | SBX_CAP_CONTEXTS | SBX_CAP_IMAGES | SBX_CAP_EGRESS |
            SBX_CAP_EGRESS_AT_START,
    .probe = gvisor_probe,
    .create = gvisor_create,
    .destroy = gvisor_destroy,
    .usage = gvisor_usage,
    .recover = gvisor_recover,
    .prewarm = gvisor_prewarm,
    .pool_idle = gvisor_pool_idle,
    .shutdown = gvisor_shutdown,
    .describe = gvisor_describe,
    .note = gvisor_note,
    .oom_kills = gvisor_oom_kills,
    .memory = gvisor_memory,
};
