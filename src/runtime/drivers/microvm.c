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
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <time.h>
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

#define HANDSHAKE_MS 60000           /* TCG boots in ~2 s here; a loaded CI host is slower */
#define KVM_PROBE_MS 15000           /* a KVM guest boots in well under a second */
#define QEMU_OVERHEAD (192ull << 20) /* QEMU itself + TCG's 32 MiB code cache, measured */
#define HOST_PIDS 64                 /* QEMU's threads + the relay */
#define DEFAULT_DISK (256ull << 20)

static int build_pooled(const char *rid, const struct sbx_limits *key, void **pv, int *chan,
                        struct sbx_error *err);
static void drop(void *pv, int chan);
/* Booted guests per (profile, memory, vCPUs, disk, pids): all fixed when a
 * guest boots, so a request takes a pooled guest only when they match. */
static struct sbx_warm_pool pool = SBX_WARM_POOL_INIT("microvm", "mvp_");

static void microvm_destroy(struct sbx_sandbox *sb);

static struct {
  bool ready;
  bool snapshots; /* microvm_snapshot: restore from golden states */
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
  snprintf(why, whylen,
           "qemu-system-x86_64 not found (%s; package qemu-system-x86, or set "
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
      find_asset(env, "microvm_initrd", "initrd.img", c->initrd, sizeof c->initrd, why, whylen) <
          0 ||
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
    snprintf(why, whylen,
             "no usable /dev/kvm (%s); set microvm_accel = tcg "
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
  const char *snap = sbx_driver_setting(env, "microvm_snapshot");
  mv.snapshots = !snap || strcmp(snap, "off") != 0;
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
  sbx_cg_netns_release(&pv->holder_pid, &pv->holder_fd); /* its netns, bridge, veth end go */
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

/* How build() starts a guest: boot (handshake_ms for READY) or restore
 * (boot.state_fd), with QMP when qmp_out is set; net: an egress
 * allowlist's spec (its net_prepare links the guest's netns first). */
struct start {
  struct sbx_mv_boot boot;
  const struct sbx_sandbox_spec *net;
  unsigned handshake_ms;
  int *qmp_out;
  char *cmdline_out;
};

/* An egress allowlist: a netns held for the guest, linked by the core
 * (spec->net_prepare: the veth, its rules), then bridged to a tap. */
static int link_network(struct sbx_mv_priv *pv, const struct sbx_sandbox_spec *spec,
                        struct sbx_mv_net *net, struct sbx_error *err)
{
  if (sbx_cg_netns_hold(&pv->cg, &pv->holder_pid, &pv->holder_fd, err) < 0 ||
      spec->net_prepare(spec->net_ctx, pv->holder_pid, err) < 0)
    return -1;
  return sbx_mv_net_plumb(pv->holder_pid, spec->net_resolv_conf, net, err);
}

static int start_one(struct sbx_mv_priv *pv, const struct sbx_limits *lim,
                     const struct start *how, int *chan_out, struct sbx_error *err)
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
  struct sbx_mv_boot boot = how->boot;
  struct sbx_mv_net net = {.tap_fd = -1};
  if (how->net && link_network(pv, how->net, &net, err) < 0)
    return -1;
  boot.tap_fd = net.tap_fd;
  boot.net_cmdline = how->net ? net.cmdline : NULL;
  _cleanup_close_ int chan = -1, qmp = -1;
  int started = sbx_mv_start(&mv.conf, pv, lim, &boot, &chan, &qmp, how->cmdline_out, err);
  if (net.tap_fd >= 0)
    close(net.tap_fd); /* QEMU has its own */
  if (started < 0)
    return -1;
  uint32_t flags = 0;
  int rc = how->boot.state_fd >= 0 ? sbx_mv_resume(qmp, err)
                                   : sbx_init_handshake_ex(chan, how->handshake_ms, &flags, err);
  if (rc < 0) {
    sbx_mv_explain(pv, err);
    return -1;
  }
  if (how->qmp_out)
    *how->qmp_out = steal_fd(&qmp);
  *chan_out = steal_fd(&chan);
  return 0;
}

static int build_how(const char *rid, const struct sbx_limits *lim, const struct start *how,
                     struct sbx_mv_priv **out, int *chan_out, struct sbx_error *err)
{
  struct sbx_mv_priv *pv = calloc(1, sizeof *pv);
  if (!pv)
    return sbx_err_sys(err, ENOMEM, "microvm");
  pv->cg.v2_dirfd = -1;
  pv->holder_fd = -1;
  snprintf(pv->rid, sizeof pv->rid, "%s", rid);
  uint64_t t0 = sbx_now_ms();
  if (start_one(pv, lim, how, chan_out, err) < 0) {
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

/* A guest booted cold. */
static int build(const char *rid, const struct sbx_limits *lim, unsigned handshake_ms,
                 struct sbx_mv_priv **out, int *chan_out, struct sbx_error *err)
{
  struct start how = {.boot = {.state_fd = -1, .tap_fd = -1}, .handshake_ms = handshake_ms};
  return build_how(rid, lim, &how, out, chan_out, err);
}

/* ---- golden states -------------------------------------------------------
 * Per boot key, a guest booted up to READY and saved paused; a create with
 * no pooled guest restores a copy (microvm_snap.c) in a fraction of a boot
 * and gives it a fresh identity.  The first create of a key boots cold and
 * asks for the golden state in the background.  Named by a hash of the key
 * and of the assets, so a new kernel, initramfs or root image is never
 * restored from an old state; recovery removes them with the guests' dirs. */

#define GOLDEN_MAX_BUILDING 4

static pthread_mutex_t golden_lock = PTHREAD_MUTEX_INITIALIZER;
static char golden_building[GOLDEN_MAX_BUILDING][PATH_MAX];

static void golden_path(const struct sbx_limits *key, char *out, size_t len)
{
  crypto_generichash_state st;
  unsigned char h[16];
  char hex[33];
  crypto_generichash_init(&st, NULL, 0, sizeof h);
  crypto_generichash_update(&st, (const unsigned char *)key, sizeof *key);
  const char *files[] = {mv.conf.kernel, mv.conf.initrd, mv.conf.rootfs};
  for (size_t i = 0; i < 3; i++) {
    struct stat sb = {0};
    (void)stat(files[i], &sb);
    crypto_generichash_update(&st, (const unsigned char *)files[i], strlen(files[i]));
    crypto_generichash_update(&st, (const unsigned char *)&sb.st_size, sizeof sb.st_size);
    crypto_generichash_update(&st, (const unsigned char *)&sb.st_mtim, sizeof sb.st_mtim);
  }
  crypto_generichash_update(&st, (const unsigned char *)mv.conf.accel, strlen(mv.conf.accel));
  crypto_generichash_final(&st, h, sizeof h);
  sbx_hex(h, sizeof h, hex);
  snprintf(out, len, "%s/golden-%s", mv.conf.dir, hex);
}

static int write_text(const char *path, const char *text)
{
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  size_t n = strlen(text);
  return fd >= 0 && write(fd, text, n) == (ssize_t)n ? 0 : -1;
}

/* Boots a guest for key and saves it as <base>.state + <base>.cmdline
 * (each written aside and renamed, so a reader sees whole files). */
static int golden_make(const struct sbx_limits *key, const char *base, struct sbx_error *err)
{
  char rid[40], tmp[PATH_MAX + 32], fin[PATH_MAX + 32], cmdline[SBX_MV_CMDLINE_MAX];
  sbx_random_id("mvg_", rid, sizeof rid);
  struct sbx_mv_priv *pv = NULL;
  int chan = -1, qmp = -1;
  struct start how = {.boot = {.qmp = true, .state_fd = -1, .tap_fd = -1},
                      .handshake_ms = HANDSHAKE_MS,
                      .qmp_out = &qmp,
                      .cmdline_out = cmdline};
  if (build_how(rid, key, &how, &pv, &chan, err) < 0)
    return -1;
  snprintf(tmp, sizeof tmp, "%s.state.tmp", base);
  int rc = sbx_mv_save(qmp, tmp, err);
  close(qmp);
  close(chan);
  teardown(pv);
  free(pv);
  snprintf(fin, sizeof fin, "%s.cmdline", base);
  if (rc == 0 && write_text(fin, cmdline) < 0)
    rc = sbx_err_sys(err, errno, "microvm: write %s", fin);
  snprintf(fin, sizeof fin, "%s.state", base);
  if (rc == 0 && rename(tmp, fin) < 0)
    rc = sbx_err_sys(err, errno, "microvm: rename %s", tmp);
  if (rc < 0)
    unlink(tmp);
  return rc;
}

struct golden_job {
  struct sbx_limits key;
  char base[PATH_MAX];
  int slot;
};

static void *golden_main(void *arg)
{
  struct golden_job *job = arg;
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  if (golden_make(&job->key, job->base, &err) < 0)
    sbx_warn("microvm", "golden state: %s", err.msg);
  else
    sbx_info("microvm", "golden state %s saved in %llu ms", job->base,
             (unsigned long long)(sbx_now_ms() - t0));
  pthread_mutex_lock(&golden_lock);
  golden_building[job->slot][0] = '\0';
  pthread_mutex_unlock(&golden_lock);
  free(job);
  return NULL;
}

/* Starts making key's golden state unless it exists or is being made. */
static void golden_want(const struct sbx_limits *key, const char *base)
{
  char state[PATH_MAX + 16];
  snprintf(state, sizeof state, "%s.state", base);
  if (!mv.snapshots || access(state, R_OK) == 0)
    return;
  pthread_mutex_lock(&golden_lock);
  int slot = -1;
  for (int i = 0; i < GOLDEN_MAX_BUILDING; i++) {
    if (!strcmp(golden_building[i], base))
      slot = -2;
    else if (slot == -1 && !golden_building[i][0])
      slot = i;
  }
  struct golden_job *job = slot >= 0 ? calloc(1, sizeof *job) : NULL;
  pthread_t t;
  if (job) {
    *job = (struct golden_job){.key = *key, .slot = slot};
    snprintf(job->base, sizeof job->base, "%s", base);
    snprintf(golden_building[slot], sizeof golden_building[slot], "%s", base);
    if (pthread_create(&t, NULL, golden_main, job) == 0) {
      pthread_detach(t);
    } else {
      golden_building[slot][0] = '\0';
      free(job);
    }
  }
  pthread_mutex_unlock(&golden_lock);
}

/* A copy of key's golden state, running; false when there is none or it
 * did not come up (logged: the caller boots cold). */
static bool golden_restore(const char *rid, const struct sbx_limits *key, const char *base,
                           struct sbx_mv_priv **pv, int *chan)
{
  char path[PATH_MAX + 16], cmdline[SBX_MV_CMDLINE_MAX] = "";
  snprintf(path, sizeof path, "%s.cmdline", base);
  _cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = cfd >= 0 ? read(cfd, cmdline, sizeof cmdline - 1) : -1;
  snprintf(path, sizeof path, "%s.state", base);
  _cleanup_close_ int sfd = n > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (sfd < 0)
    return false;
  cmdline[n] = '\0';
  struct sbx_error err = {0};
  struct start how = {.boot = {.qmp = true, .state_fd = sfd, .tap_fd = -1, .cmdline = cmdline}};
  int qmp = -1;
  how.qmp_out = &qmp;
  if (build_how(rid, key, &how, pv, chan, &err) < 0) {
    sbx_warn("microvm", "restoring %s: %s; booting cold", base, err.msg);
    return false;
  }
  close(qmp);
  return true;
}

/* A restored guest's own identity: a new RNG seed, the clock, its
 * hostname (the guest relay applies them; vm/link.h). */
static int fresh_identity(struct sbx_sandbox *sb, const char *hostname, struct sbx_error *err)
{
  uint8_t buf[32 + 8 + 4 + 64 + 1];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  uint32_t hlen = (uint32_t)strnlen(hostname, 64);
  randombytes_buf(buf, 32);
  memcpy(buf + 32, &ns, 8);
  memcpy(buf + 40, &hlen, 4);
  memcpy(buf + 44, hostname, hlen);
  buf[44 + hlen] = '\0';
  struct sbx_chan_reply rep;
  int rc = sbx_chan_call_fds(sb, SBX_LINK_MSG_IDENTITY, buf, 45 + hlen, NULL, 0, "identity",
                             &rep, err);
  sodium_memzero(buf, 32);
  return rc;
}

/* The limits a guest is booted with: a request's, with the defaults filled
 * in (so a request and a profile's prewarm key compare equal). */
static struct sbx_limits boot_key(const struct sbx_limits *req)
{
  return (struct sbx_limits){.memory_bytes =
                                 req->memory_bytes ? req->memory_bytes : 512ull << 20,
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

/* The sandbox around a started guest. */
static void attach(struct sbx_sandbox *sb, struct sbx_mv_priv *pv, int chan,
                   const struct sbx_limits *lim)
{
  /* A guest that stops reading its link stops its relay taking requests
   * (windows, vm/link.h): a request then fails within the reply bound
   * instead of blocking its thread in send() for ever. */
  struct timeval tv = {.tv_sec = SBX_CHAN_REPLY_TIMEOUT_MS / 1000};
  if (setsockopt(chan, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
    sbx_warn("microvm", "%s: SO_SNDTIMEO: %s", pv->rid, strerror(errno));
  sb->init_fd = chan;
  sb->init_pid = pv->qemu_pid;
  sb->fd_in = true; /* nothing crosses the link but bytes */
  sb->spool_dir = strdup(pv->dir);
  sb->limits.disk_bytes = lim->disk_bytes;
  snprintf(sb->root_desc, sizeof sb->root_desc, "/ (microvm %.50s)", pv->rid);
  sb->priv = pv;
}

/* A sandbox of an OCI image (its own root image, microvm_image.c, and its
 * User) or with an egress allowlist (its NIC, microvm_net.c): always
 * booted cold, since pools and golden states hold host-pack guests with
 * no network. */
static int create_cold(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                       struct sbx_error *err)
{
  char images[PATH_MAX + 16], root[PATH_MAX + 128];
  snprintf(images, sizeof images, "%s-images", mv.conf.dir);
  if (spec->nlayers && sbx_mv_image_root(images, spec->image_digest, spec->layers, spec->nlayers,
                                         root, sizeof root, err) < 0)
    return -1;
  struct sbx_limits lim = boot_key(&spec->limits);
  struct sbx_sandbox *sb = sbx_sandbox_alloc(&sbx_drv_microvm, spec);
  if (!sb)
    return sbx_err_sys(err, ENOMEM, "microvm");
  struct start how = {.boot = {.state_fd = -1,
                               .tap_fd = -1,
                               .rootfs = spec->nlayers ? root : NULL,
                               .uid = spec->run_uid,
                               .gid = spec->run_gid},
                      .net = spec->net_prepare ? spec : NULL,
                      .handshake_ms = HANDSHAKE_MS};
  struct sbx_mv_priv *pv = NULL;
  int chan = -1;
  if (build_how(spec->id, &lim, &how, &pv, &chan, err) < 0) {
    sbx_sandbox_free(sb);
    return -1;
  }
  attach(sb, pv, chan, &lim);
  *out = sb;
  return 0;
}

static int microvm_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                          struct sbx_error *err)
{
  *out = NULL;
  if (!mv.ready)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "microvm driver not probed/available");
  /* An image reference must come with its layers (the core resolves it);
   * never the host pack in its place. */
  bool named = spec->image && *spec->image && strcmp(spec->image, "host") != 0;
  if ((named || spec->nlayers) && (!spec->layers || !spec->nlayers))
    return sbx_err_field(err, "image", "image '%s' has no usable layers",
                         spec->image ? spec->image : "");
  if (spec->nlayers || spec->net_prepare)
    return create_cold(spec, out, err);
  struct sbx_limits lim = boot_key(&spec->limits);
  struct sbx_sandbox *sb = sbx_sandbox_alloc(&sbx_drv_microvm, spec);
  if (!sb)
    return sbx_err_sys(err, ENOMEM, "microvm");
  void *pooled = NULL;
  int chan = -1;
  char base[PATH_MAX];
  golden_path(&lim, base, sizeof base);
  /* A pooled guest was booted with these very limits and its cgroup set
   * to them; nothing but its sbx-init has run in it. */
  struct sbx_mv_priv *pv =
      sbx_warm_pool_take(&pool, spec->profile ? spec->profile : "", &lim, &pooled, &chan)
          ? pooled
          : NULL;
  bool restored = !pv && mv.snapshots && golden_restore(spec->id, &lim, base, &pv, &chan);
  if (!pv && build(spec->id, &lim, HANDSHAKE_MS, &pv, &chan, err) < 0) {
    sbx_sandbox_free(sb);
    return -1;
  }
  if (!restored)
    golden_want(&lim, base);
  attach(sb, pv, chan, &lim);
  char host[64];
  sbx_mv_hostname(spec->id, host);
  if (restored && fresh_identity(sb, host, err) < 0) {
    /* never hand out a copy that still carries the golden guest's seed */
    microvm_destroy(sb);
    return -1;
  }
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
  /* an image root being built when the daemon died: its overlay and file */
  char images[PATH_MAX + 16];
  snprintf(images, sizeof images, "%s-images", mv.conf.dir);
  d = opendir(images);
  while (d && (de = readdir(d))) {
    char p[PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", images, de->d_name);
    if (!strncmp(de->d_name, "mnt-", 4)) {
      umount2(p, MNT_DETACH);
      rmdir(p);
    } else if (strstr(de->d_name, ".tmp")) {
      unlink(p);
    }
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
  /* A golden state being made has a paused guest that no relay EOF can
   * power off (QEMU dropped its death signal with -runas): kill it, and
   * give its thread a moment to clean up after itself. */
  if (sbx_cg_recover(&mv.cg) > 0)
    sbx_info("microvm", "stopped the guests still starting");
  for (int tries = 0; tries < 500; tries++) {
    bool busy = false;
    pthread_mutex_lock(&golden_lock);
    for (int i = 0; i < GOLDEN_MAX_BUILDING; i++)
      busy |= golden_building[i][0] != '\0';
    pthread_mutex_unlock(&golden_lock);
    if (!busy)
      break;
    usleep(10000);
  }
  sbx_cg_remove_parents(&mv.cg);
}

const struct sbx_driver sbx_drv_microvm = {
    .abi = SBX_DRIVER_ABI,
    .name = "microvm",
    .klass = "dedicated-kernel",
    /* everything through the fd-in forms over the link (vm/link.h) but
     * ports: the daemon's port proxy (libcurl) refuses the fd-in socket
     * that stands for the connection (docs/microvm.md), so not listed; OCI
     * images as squashfs roots (microvm_image.c); egress allowlists on a
     * tap bridged to the net module's veth, linked before the guest
     * starts (microvm_net.c) */
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_TERMINAL | SBX_CAP_WATCH | SBX_CAP_ARCHIVE |
            SBX_CAP_CONTEXTS | SBX_CAP_IMAGES | SBX_CAP_EGRESS | SBX_CAP_EGRESS_AT_START,
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
