/* microvm.c — the `microvm` driver: every sandbox under its own Linux
 * kernel, in a QEMU microVM (class dedicated-kernel; profiles `microvm`
 * and `kata`).
 *
 * A sandbox is one QEMU process booting the configured kernel with an
 * initramfs whose PID 1 is sbx-vm (vm/boot.c): it mounts the read-only
 * root image under a tmpfs overlay sized by `disk` and starts sbx-init.
 * sbx-init speaks the usual protocol, fd-in forms only, over a
 * virtio-serial port; on the host, `sbx-vm relay` turns that byte stream
 * back into the SOCK_SEQPACKET channel every driver hands the daemon
 * (vm/link.h).  So exec, files, archives, terminals, watch and ports are
 * the sandbox client's usual messages, and a guest is as hostile to the
 * daemon as any sbx-init: the relay ends the link on any broken rule.
 *
 * Limits: the guest gets the request's memory and vCPUs; QEMU and the
 * relay run in a host cgroup (memory: the guest's plus QEMU's own, CPU
 * quota, pids) under this daemon's microvm parent, so a guest can never
 * use more of the host than its request, whatever it does inside.
 * destroy() closes the channel, SIGKILLs the cgroup and removes its dir.
 *
 * Fail closed: no QEMU, kernel, initramfs, root image or sbx-vm; an
 * accelerator that cannot boot a probe guest; TCG not asked for → the
 * profiles are unavailable with the reason.  `microvm_accel = auto`
 * (default) takes KVM only when a probe guest boots on it; software
 * emulation (tcg) is a real dedicated kernel too, only slow, and is used
 * only when configured. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "init/launch.h"
#include "init/proto.h"
#include "runtime/drivers/cg_spawn.h"
#include "runtime/drivers/iso_limits.h"
#include "runtime/drivers/microvm_int.h"
#include "runtime/drivers/warm_pool.h"
#include "runtime/chan.h"
#include "runtime/sandbox.h"
#include "vm/link.h"

#define HANDSHAKE_MS 60000     /* TCG boots in ~2 s here; a loaded CI host is slower */
#define KVM_PROBE_MS 15000     /* a KVM guest boots in well under a second */
#define QEMU_OVERHEAD (192ull << 20) /* QEMU itself + TCG's 32 MiB code cache, measured */
#define HOST_PIDS 64           /* QEMU's threads + the relay */
#define DEFAULT_DISK (256ull << 20)

static int build_pooled(const char *rid, const struct sbx_limits *key, void **pv, int *chan,
                        struct sbx_error *err);
static void drop(void *pv, int chan);
/* Booted guests per (profile, memory, vCPUs, disk, pids): all fixed when a
 * guest boots, so a request takes a pooled guest only when they match. */
static struct sbx_warm_pool pool = SBX_WARM_POOL_INIT("microvm", "mvp_");

static struct {
  bool ready;
  struct sbx_mv_conf conf;
  char describe[32];
  char note[256];
  struct sbx_cg_host cg;
} mv;

/* ---- probe ------------------------------------------------------------ */

/* The first of candidates (NULL-terminated) that exists, into out. */
static bool first_existing(const char *const *candidates, char *out, size_t len)
{
  for (size_t i = 0; candidates[i]; i++)
    if (access(candidates[i], R_OK) == 0) {
      snprintf(out, len, "%s", candidates[i]);
      return true;
    }
  return false;
}

/* An asset: the setting when given, else <dir>/name for the usual dirs
 * (beside sbx-init, the build tree's microvm/, /var/lib/sandboxd/microvm). */
static int find_asset(const struct sbx_driver_env *env, const char *key, const char *name,
                      char *out, size_t len, char *why, size_t whylen)
{
  const char *set = sbx_driver_setting(env, key);
  if (set) {
    snprintf(out, len, "%s", set);
    if (access(out, R_OK) == 0)
      return 0;
    snprintf(why, whylen, "%s %s: %s", key, out, strerror(errno));
    return -1;
  }
  char dir[PATH_MAX], a[PATH_MAX + 64], b[PATH_MAX + 64], c[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s", env->init_path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  snprintf(a, sizeof a, "%s/microvm/%s", dir, name);
  snprintf(b, sizeof b, "%s/../../microvm/%s", dir, name);
  snprintf(c, sizeof c, "/var/lib/sandboxd/microvm/%s", name);
  const char *cand[] = {a, b, c, NULL};
  if (first_existing(cand, out, len))
    return 0;
  snprintf(why, whylen,
           "no microVM %s (%s, or set %s; `make microvm-assets` or scripts/microvm-assets.py "
           "builds them)",
           name, c, key);
  return -1;
}

static int find_helper(const struct sbx_driver_env *env, char *out, size_t len, char *why,
                       size_t whylen)
{
  const char *set = sbx_driver_setting(env, "microvm_helper");
  char dir[PATH_MAX], a[PATH_MAX + 32], b[PATH_MAX + 32], c[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", env->init_path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  /* beside sbx-init (installed), or the build tree's src/vm from its
   * src/init or from its top */
  snprintf(a, sizeof a, "%s/sbx-vm", dir);
  snprintf(b, sizeof b, "%s/../vm/sbx-vm", dir);
  snprintf(c, sizeof c, "%s/src/vm/sbx-vm", dir);
  const char *cand[] = {set ? set : a, set ? NULL : b, c, NULL};
  for (size_t i = 0; cand[i]; i++)
    if (access(cand[i], X_OK) == 0) {
      snprintf(out, len, "%s", cand[i]);
      return 0;
    }
  snprintf(why, whylen, "sbx-vm (the microVM link relay) not found at %s (microvm_helper)",
           cand[0]);
  return -1;
}

static int find_qemu(const struct sbx_driver_env *env, char *out, size_t len, char *why,
                     size_t whylen)
{
  const char *set = sbx_driver_setting(env, "microvm_qemu");
  const char *cand[] = {set ? set : "/usr/bin/qemu-system-x86_64",
                        set ? NULL : "/usr/local/bin/qemu-system-x86_64", NULL};
  for (size_t i = 0; cand[i]; i++)
    if (access(cand[i], X_OK) == 0) {
      snprintf(out, len, "%s", cand[i]);
      return 0;
    }
  snprintf(why, whylen, "qemu-system-x86_64 not found (%s; package qemu-system-x86, or set "
                        "microvm_qemu)",
           cand[0]);
  return -1;
}

/* The host TSC in kHz (a TCG guest's kernel is told it; microvm_qemu.c). */
static unsigned host_tsc_khz(void)
{
  unsigned khz = 0;
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/tsc_freq_khz", "re");
  if (f) {
    if (fscanf(f, "%u", &khz) != 1)
      khz = 0;
    fclose(f);
    if (khz)
      return khz;
  }
  f = fopen("/proc/cpuinfo", "re");
  char line[256];
  double mhz = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
      break;
  if (f)
    fclose(f);
  return (unsigned)(mhz * 1000);
}

static int setup_cgroups(const struct sbx_driver_env *env, struct sbx_error *err)
{
  unsigned char h[8];
  char name[48], hex[17], given[96];
  crypto_generichash(h, sizeof h, (const unsigned char *)env->state_dir, strlen(env->state_dir),
                     NULL, 0);
  sbx_hex(h, sizeof h, hex);
  snprintf(name, sizeof name, "sandboxd-%s-microvm", hex);
  const char *parent = sbx_driver_setting(env, "cgroup_parent");
  if (parent && *parent)
    snprintf(given, sizeof given, "%s-microvm", parent);
  return sbx_cg_detect(&mv.cg, NULL, NULL, NULL, parent && *parent ? given : name, err);
}

static int find_assets(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  struct sbx_mv_conf *c = &mv.conf;
  if (find_qemu(env, c->qemu, sizeof c->qemu, why, whylen) < 0 ||
      find_helper(env, c->helper, sizeof c->helper, why, whylen) < 0 ||
      find_asset(env, "microvm_kernel", "vmlinuz", c->kernel, sizeof c->kernel, why, whylen) <
          0 ||
      find_asset(env, "microvm_initrd", "initrd.img", c->initrd, sizeof c->initrd, why,
                 whylen) < 0 ||
      find_asset(env, "microvm_rootfs", "rootfs.sqfs", c->rootfs, sizeof c->rootfs, why,
                 whylen) < 0)
    return -1;
  snprintf(c->dir, sizeof c->dir, "%s/microvm", env->state_dir);
  if (sbx_mkdir_p(c->dir, 0711) < 0) {
    snprintf(why, whylen, "mkdir %s: %s", c->dir, strerror(errno));
    return -1;
  }
  struct passwd *pw = getpwnam("nobody");
  snprintf(c->runas, sizeof c->runas, "%s", pw ? "nobody" : "");
  c->tsc_khz = host_tsc_khz();
  return 0;
}

static int build(const char *rid, const struct sbx_limits *lim, unsigned handshake_ms,
                 struct sbx_mv_priv **out, int *chan_out, struct sbx_error *err);
static void teardown(struct sbx_mv_priv *pv);

/* Boots a throw-away guest on the configured accelerator: the only proof
 * that this kernel runs here (PVM hosts open /dev/kvm and then cannot run
 * an unmodified kernel). */
static int probe_boot(unsigned timeout_ms, char *why, size_t whylen)
{
  struct sbx_error err = {0};
  struct sbx_mv_priv *pv = NULL;
  int chan = -1;
  char rid[40];
  unsigned char r[6];
  char hex[13];
  randombytes_buf(r, sizeof r);
  sbx_hex(r, sizeof r, hex);
  snprintf(rid, sizeof rid, "probe_%s", hex);
  struct sbx_limits lim = {.memory_bytes = 256ull << 20, .cpu_millis = 1000, .pids = 64};
  uint64_t t0 = sbx_now_ms();
  if (build(rid, &lim, timeout_ms, &pv, &chan, &err) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  sbx_info("microvm", "probe guest up on %s in %llu ms", mv.conf.accel,
           (unsigned long long)(sbx_now_ms() - t0));
  close(chan);
  teardown(pv);
  free(pv);
  return 0;
}

static int choose_accel(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  const char *want = sbx_driver_setting(env, "microvm_accel");
  if (!want)
    want = "auto";
  unsigned probe_ms = env->probe_timeout_ms ? env->probe_timeout_ms : 10000;
  if (!strcmp(want, "off")) {
    snprintf(why, whylen, "microvm_accel = off (SANDBOXD_MICROVM_ACCEL): not tried");
    return -1;
  }
  if (!strcmp(want, "tcg")) {
    snprintf(mv.conf.accel, sizeof mv.conf.accel, "tcg");
    snprintf(mv.note, sizeof mv.note, "software emulation (microvm_accel = tcg): slow");
    return probe_boot(HANDSHAKE_MS, why, whylen);
  }
  snprintf(mv.conf.accel, sizeof mv.conf.accel, "kvm");
  int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whylen, "no usable /dev/kvm (%s); set microvm_accel = tcg "
                          "(SANDBOXD_MICROVM_ACCEL=tcg) for software emulation",
             strerror(errno));
    return -1;
  }
  close(fd);
  char boot_why[256];
  unsigned ms = probe_ms > KVM_PROBE_MS ? probe_ms : KVM_PROBE_MS;
  if (probe_boot(ms, boot_why, sizeof boot_why) == 0)
    return 0;
  snprintf(why, whylen,
           "a probe guest did not boot on KVM within %u s: %.200s; set microvm_accel = tcg "
           "(SANDBOXD_MICROVM_ACCEL=tcg) for software emulation",
           ms / 1000, boot_why);
  return -1;
}

static int microvm_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  struct sbx_error err = {0};
  mv.ready = false;
  if (!env || !env->init_path || !env->state_dir) {
    snprintf(why, whylen, "no sbx-init path or state dir");
    return -1;
  }
  if (geteuid() != 0) {
    snprintf(why, whylen, "the microvm driver needs a root daemon (cgroups)");
    return -1;
  }
  if (find_assets(env, why, whylen) < 0)
    return -1;
  if (setup_cgroups(env, &err) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  mv.ready = true; /* build() needs it; undone below when the probe guest fails */
  if (choose_accel(env, why, whylen) < 0) {
    mv.ready = false;
    return -1;
  }
  snprintf(mv.describe, sizeof mv.describe, "%s", mv.conf.accel);
  sbx_warm_pool_start(&pool, build_pooled, drop,
                      sbx_driver_setting_uint(env, "microvm_pool_size", 1, SBX_WARM_POOL_MAX));
  sbx_info("microvm", "qemu %s, kernel %s, accel %s", mv.conf.qemu, mv.conf.kernel,
           mv.conf.accel);
  return 0;
}

static const char *microvm_describe(void) { return mv.ready ? mv.describe : NULL; }

static const char *microvm_note(void) { return mv.ready ? mv.note : NULL; }

/* ---- create / destroy ------------------------------------------------- */

static void teardown(struct sbx_mv_priv *pv)
{
  struct sbx_error err = {0};
  /* Everything of the guest is in the cgroup: QEMU and the relay. */
  if (pv->cg.host && sbx_cg_kill(&pv->cg, 5000, &err) < 0)
    sbx_warn("microvm", "%s: %s", pv->rid, err.msg);
  if (sbx_cg_spawn_reap(pv->qemu_pid, 5000, true) < 0)
    sbx_warn("microvm", "%s: qemu %d not reaped", pv->rid, (int)pv->qemu_pid);
  if (sbx_cg_spawn_reap(pv->relay_pid, 5000, true) < 0)
    sbx_warn("microvm", "%s: relay %d not reaped", pv->rid, (int)pv->relay_pid);
  pv->qemu_pid = pv->relay_pid = 0;
  if (pv->cg.host && sbx_cg_remove(&pv->cg, &err) < 0)
    sbx_warn("microvm", "%s: %s", pv->rid, err.msg);
  if (pv->dir[0] && sbx_rm_rf(pv->dir) < 0 && errno != ENOENT)
    sbx_warn("microvm", "%s: rm %s: %s", pv->rid, pv->dir, strerror(errno));
}

/* The host cgroup around QEMU: the guest's memory plus QEMU's own, the
 * request's CPU quota, QEMU's threads; the request's pids apply inside. */
static struct sbx_iso_limits host_limits(const struct sbx_limits *req)
{
  struct sbx_iso_limits lim = sbx_drv_iso_limits(req);
  uint64_t guest = req->memory_bytes ? req->memory_bytes : 512ull << 20;
  lim.memory_bytes = guest + QEMU_OVERHEAD;
  lim.pids = HOST_PIDS;
  return lim;
}

static int start_one(struct sbx_mv_priv *pv, const struct sbx_limits *lim,
                     unsigned handshake_ms, int *chan_out, struct sbx_error *err)
{
  struct sbx_iso_limits hl = host_limits(lim);
  if (sbx_cg_create(&mv.cg, pv->rid, &hl, &pv->cg, err) < 0) {
    memset(&pv->cg, 0, sizeof pv->cg); /* not ours (EEXIST) or already undone */
    pv->cg.v2_dirfd = -1;
    return -1;
  }
  snprintf(pv->dir, sizeof pv->dir, "%s/%s", mv.conf.dir, pv->rid);
  if (mkdir(pv->dir, 0700) < 0) {
    int e = errno;
    if (e == EEXIST)
      pv->dir[0] = '\0'; /* someone else's: leave it alone */
    return sbx_err_sys(err, e, "microvm: mkdir");
  }
  _cleanup_close_ int chan = -1;
  if (sbx_mv_start(&mv.conf, pv, lim, &chan, err) < 0)
    return -1;
  uint32_t flags = 0;
  if (sbx_init_handshake_ex(chan, handshake_ms, &flags, err) < 0) {
    sbx_mv_explain(pv, err);
    return -1;
  }
  *chan_out = steal_fd(&chan);
  return 0;
}

static int build(const char *rid, const struct sbx_limits *lim, unsigned handshake_ms,
                 struct sbx_mv_priv **out, int *chan_out, struct sbx_error *err)
{
  struct sbx_mv_priv *pv = calloc(1, sizeof *pv);
  if (!pv)
    return sbx_err_sys(err, ENOMEM, "microvm");
  pv->cg.v2_dirfd = -1;
  snprintf(pv->rid, sizeof pv->rid, "%s", rid);
  uint64_t t0 = sbx_now_ms();
  if (start_one(pv, lim, handshake_ms, chan_out, err) < 0) {
    err->code = SBX_E_RUNTIME_UNAVAILABLE;
    sbx_err_prefix(err, "microvm %s", rid);
    teardown(pv);
    free(pv);
    return -1;
  }
  sbx_debug("microvm", "%s up in %llu ms", rid, (unsigned long long)(sbx_now_ms() - t0));
  *out = pv;
  return 0;
}

/* The limits a guest is booted with: a request's, with the defaults filled
 * in (so a request and a profile's prewarm key compare equal). */
static struct sbx_limits boot_key(const struct sbx_limits *req)
{
  return (struct sbx_limits){.memory_bytes = req->memory_bytes ? req->memory_bytes : 512ull << 20,
                             .cpu_millis = req->cpu_millis,
                             .disk_bytes = req->disk_bytes ? req->disk_bytes : DEFAULT_DISK,
                             .pids = req->pids};
}

static int build_pooled(const char *rid, const struct sbx_limits *key, void **pv, int *chan,
                        struct sbx_error *err)
{
  return build(rid, key, HANDSHAKE_MS, (struct sbx_mv_priv **)pv, chan, err);
}

static void drop(void *pv, int chan)
{
  if (chan >= 0)
    close(chan);
  teardown(pv);
  free(pv);
}

static void microvm_prewarm(const char *profile, const struct sbx_limits *limits)
{
  if (mv.ready) {
    struct sbx_limits key = boot_key(limits);
    sbx_warm_pool_want(&pool, profile, &key);
  }
}

static unsigned microvm_pool_idle(const char *profile, const struct sbx_limits *limits)
{
  (void)limits;
  return mv.ready ? sbx_warm_pool_idle(&pool, profile) : 0;
}

static int microvm_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                          struct sbx_error *err)
{
  *out = NULL;
  if (!mv.ready)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "microvm driver not probed/available");
  bool named = spec->image && *spec->image && strcmp(spec->image, "host") != 0;
  if (named || spec->nlayers)
    return sbx_err_field(err, "image", "the microvm profiles run the host pack only, not '%s'",
                         spec->image ? spec->image : "");
  struct sbx_limits lim = boot_key(&spec->limits);
  struct sbx_sandbox *sb = sbx_sandbox_alloc(&sbx_drv_microvm, spec);
  if (!sb)
    return sbx_err_sys(err, ENOMEM, "microvm");
  void *pooled = NULL;
  int chan = -1;
  /* A pooled guest was booted with these very limits and its cgroup set
   * to them; nothing but its sbx-init has run in it. */
  struct sbx_mv_priv *pv =
      sbx_warm_pool_take(&pool, spec->profile ? spec->profile : "", &lim, &pooled, &chan)
          ? pooled
          : NULL;
  if (!pv && build(spec->id, &lim, HANDSHAKE_MS, &pv, &chan, err) < 0) {
    sbx_sandbox_free(sb);
    return -1;
  }
  sb->init_fd = chan;
  sb->init_pid = pv->qemu_pid;
  sb->fd_in = true; /* nothing crosses the link but bytes */
  sb->spool_dir = strdup(pv->dir);
  sb->limits.disk_bytes = lim.disk_bytes;
  snprintf(sb->root_desc, sizeof sb->root_desc, "/ (microvm %.50s)", pv->rid);
  sb->priv = pv;
  *out = sb;
  return 0;
}

static void microvm_destroy(struct sbx_sandbox *sb)
{
  if (!sb)
    return;
  struct sbx_mv_priv *pv = sb->priv;
  if (sb->init_fd >= 0) {
    close(sb->init_fd);
    sb->init_fd = -1;
  }
  if (pv) {
    teardown(pv);
    free(pv);
  }
  sb->priv = NULL;
  sbx_sandbox_free(sb);
}

static int microvm_usage(struct sbx_sandbox *sb, struct sbx_usage *out)
{
  struct sbx_mv_priv *pv = sb->priv;
  return pv ? sbx_drv_cg_usage(&pv->cg, out) : -1;
}

static int microvm_memory(struct sbx_sandbox *sb, struct sbx_memory *out)
{
  struct sbx_mv_priv *pv = sb->priv;
  return pv ? sbx_drv_cg_memory(&pv->cg, out) : -1;
}

/* The guest kernel's OOM kills, answered by the guest relay (vm/link.h):
 * the host cgroup's counter never moves, since the guest's kernel, not the
 * host's, kills inside it. */
static int microvm_oom_kills(struct sbx_sandbox *sb, uint64_t *out)
{
  struct sbx_chan_reply rep;
  struct sbx_error err = {0};
  if (sbx_chan_call_fds(sb, SBX_LINK_MSG_OOM_KILLS, NULL, 0, NULL, 0, "oom kills", &rep, &err) <
      0)
    return -1;
  *out = rep.value;
  return 0;
}

/* ---- recover / shutdown ----------------------------------------------- */

static int microvm_recover(const struct sbx_driver_env *env)
{
  (void)env;
  if (!mv.ready)
    return 0;
  int n = sbx_cg_recover(&mv.cg); /* every QEMU and relay of a previous run dies here */
  DIR *d = opendir(mv.conf.dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", mv.conf.dir, de->d_name);
    if (sbx_rm_rf(p) == 0)
      n++;
  }
  if (d)
    closedir(d);
  return n;
}

static void microvm_shutdown(void)
{
  if (!mv.ready)
    return;
  sbx_warm_pool_stop(&pool);
  for (int i = 0; i < mv.cg.nctrl; i++)
    if (rmdir(mv.cg.ctrl[i].parent) < 0 && errno != ENOENT)
      sbx_debug("microvm", "rmdir %s: %s", mv.cg.ctrl[i].parent, strerror(errno));
}

const struct sbx_driver sbx_drv_microvm = {
    .abi = SBX_DRIVER_ABI,
    .name = "microvm",
    .klass = "dedicated-kernel",
    /* everything through the fd-in forms over the link (vm/link.h); no
     * images and no network yet (docs/microvm.md) */
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_TERMINAL | SBX_CAP_WATCH | SBX_CAP_UPSTREAM |
            SBX_CAP_ARCHIVE | SBX_CAP_CONTEXTS,
    .probe = microvm_probe,
    .create = microvm_create,
    .destroy = microvm_destroy,
    .usage = microvm_usage,
    .recover = microvm_recover,
    .shutdown = microvm_shutdown,
    .prewarm = microvm_prewarm,
    .pool_idle = microvm_pool_idle,
    .describe = microvm_describe,
    .note = microvm_note,
    .memory = microvm_memory,
    .oom_kills = microvm_oom_kills,
};
