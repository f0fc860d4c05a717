/* microvm_qemu.c — one microVM guest: QEMU's command line, QEMU and the
 * host relay started in the sandbox's cgroup, the console's words.
 *
 * The machine is QEMU's `microvm` (no PCI, no firmware tables beyond the
 * ACPI DSDT that lists the virtio-mmio devices: Debian's kernel has no
 * virtio_mmio.device= command-line support, so ACPI stays on), with
 * three devices: a virtio-serial port named sbx.link (the link to the host
 * relay; vm/link.h), the read-only root image on virtio-blk, and the 8250
 * UART the guest console writes to (a file the daemon reads only to
 * explain a failed boot).  No NIC at all for network none (-nodefaults);
 * an egress allowlist adds a virtio-net on a tap (microvm_net.c).
 *
 * The link is a socketpair: QEMU gets one end as an already connected
 * chardev socket (fd=3), the relay the other; nothing in the filesystem,
 * so no other process can connect to a guest.  QEMU then drops to an
 * unprivileged user (-runas) and confines itself with its seccomp filter
 * (-sandbox), as libvirt runs it: a guest that escapes the emulator lands
 * in a process with no privileges in a cgroup that bounds it. */
#include "runtime/drivers/microvm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "common/cleanup.h"
#include "common/spawner.h"
#include "common/util.h"
#include "runtime/drivers/cg_spawn.h"

#define MIN_GUEST_MIB 128
#define DEFAULT_GUEST_MIB 512

#define DEFAULT_DISK (256ull << 20)
#define DEFAULT_PIDS 256

static struct sbx_spawner spawner = SBX_SPAWNER_INIT("microvm", NULL);
static char *const helper_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* The guest kernel's command line, each option for a reason:
 *   console=ttyS0 quiet     the console is a file, for failed boots only
 *   reboot=k panic=-1       a panic or the guest init's poweroff ends the
 *                           guest at once (with QEMU's -no-reboot: QEMU exits)
 *   pci=off                 microvm has no PCI: skip probing for it
 *   i8042.* 8250.nr_uarts=1 no keyboard controller to wait for, one UART
 *   random.trust_cpu=on     the RNG is ready without waiting for entropy
 *   tsc_early_khz=…         TCG only: the emulated PIT calibrates the TSC
 *   tsc=reliable            badly and half the boots hang without it
 *   no_timer_check          (measured: docs/microvm.md)
 *   sbx.*                   for the guest init (vm/boot.c): the writable
 *                           disk's size, the hostname, a fresh random seed
 *                           and the clock, so no two guests share identity;
 *                           for sbx-vm (vm/main.c) the pids limit and
 *                           the workload's user */
void sbx_mv_hostname(const char *rid, char out[64])
{
  size_t i = 0;
  for (; rid[i] && i < 63; i++)
    out[i] = rid[i] == '_' ? '-' : rid[i];
  out[i] = '\0';
}

static void kernel_cmdline(const struct sbx_mv_conf *conf, const struct sbx_mv_priv *pv,
                           uint64_t disk, uint64_t pids, const struct sbx_mv_boot *boot,
                           char *out, size_t len)
{
  unsigned char seed[32];
  char hex[65], tsc[64] = "", host[64];
  sbx_mv_hostname(pv->rid, host);
  randombytes_buf(seed, sizeof seed);
  sbx_hex(seed, sizeof seed, hex);
  if (!strcmp(conf->accel, "tcg") && conf->tsc_khz)
    snprintf(tsc, sizeof tsc, " tsc_early_khz=%u tsc=reliable no_timer_check", conf->tsc_khz);
  int w = snprintf(
      out, len,
      "console=ttyS0 quiet reboot=k panic=-1 pci=off i8042.noaux i8042.nokbd i8042.nopnp "
      "8250.nr_uarts=1 random.trust_cpu=on%s sbx.disk=%llu sbx.hostname=%s "
      "sbx.seed=%s sbx.time=%lld sbx.pids=%llu sbx.uid=%u sbx.gid=%u",
      tsc, (unsigned long long)disk, host, hex, (long long)time(NULL),
      (unsigned long long)(pids ? pids : DEFAULT_PIDS), boot->uid ? boot->uid : 1000,
      boot->gid ? boot->gid : 1000);
  if (boot->net_cmdline && w > 0 && (size_t)w < len)
    snprintf(out + w, len - (size_t)w, "%s", boot->net_cmdline);
}

/* The guest's RAM is the request, never below what the kernel boots in:
 * the guest kernel's own OOM killer is the limit.  (A memory cgroup in
 * the guest below its RAM thrashes instead: under TCG, reclaiming and
 * refaulting the root image's page cache outlasts any exec timeout.) */
static unsigned guest_mib(const struct sbx_limits *lim)
{
  uint64_t mib = lim->memory_bytes ? lim->memory_bytes >> 20 : DEFAULT_GUEST_MIB;
  return (unsigned)(mib < MIN_GUEST_MIB ? MIN_GUEST_MIB : mib);
}

static unsigned guest_cpus(const struct sbx_limits *lim)
{
  long host = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned n = lim->cpu_millis ? (unsigned)((lim->cpu_millis + 999) / 1000) : 1;
  if (host > 0 && n > (unsigned)host)
    n = (unsigned)host;
  return n ? n : 1;
}

struct qemu_args {
  char machine[96], accel[48], mem[16], smp[16], console[PATH_MAX + 16];
  char append[SBX_MV_CMDLINE_MAX];
  char drive[PATH_MAX + 64], nic[64];
  char *argv[60];
};

static void qemu_argv(const struct sbx_mv_conf *conf, const struct sbx_mv_priv *pv,
                      const struct sbx_limits *lim, const struct sbx_mv_boot *boot,
                      struct qemu_args *a)
{
  bool kvm = !strcmp(conf->accel, "kvm");
  /* rtc=off is microvm's advice under KVM; under TCG it doubles the boot. */
  snprintf(a->machine, sizeof a->machine, "microvm,x-option-roms=off,isa-serial=on,pcie=off%s",
           kvm ? ",rtc=off" : "");
  /* tb-size: TCG's translated-code cache, 1 GiB by default — per guest. */
  snprintf(a->accel, sizeof a->accel, "%s", kvm ? "kvm" : "tcg,tb-size=32");
  snprintf(a->mem, sizeof a->mem, "%u", guest_mib(lim));
  snprintf(a->smp, sizeof a->smp, "%u", guest_cpus(lim));
  snprintf(a->console, sizeof a->console, "file:%s/console.log", pv->dir);
  snprintf(a->drive, sizeof a->drive, "file=%s,if=none,id=root,format=raw,readonly=on",
           boot->rootfs ? boot->rootfs : conf->rootfs);
  if (boot->cmdline)
    snprintf(a->append, sizeof a->append, "%s", boot->cmdline);
  else
    kernel_cmdline(conf, pv, lim->disk_bytes ? lim->disk_bytes : DEFAULT_DISK, lim->pids, boot,
                   a->append, sizeof a->append);
  char **v = a->argv;
  const char *fixed[] = {conf->qemu, "-M", a->machine, "-accel", a->accel, "-cpu",
                         kvm ? "host" : "max", "-m", a->mem, "-smp", a->smp, "-nodefaults",
                         "-no-user-config", "-display", "none", "-no-reboot", "-serial",
                         a->console, "-kernel", conf->kernel, "-initrd", conf->initrd, "-append",
                         a->append, "-device", "virtio-serial-device", "-chardev",
                         "socket,id=link,fd=3", "-device",
                         "virtserialport,chardev=link,name=sbx.link", "-drive", a->drive,
                         "-device", "virtio-blk-device,drive=root", "-sandbox",
                         /* elevateprivileges stays allowed: its filter is in place before
       * -runas drops to the user, whose setgid/setuid it would kill */
                         "on,obsolete=deny,spawn=deny,resourcecontrol=deny"};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    *v++ = (char *)fixed[i];
  if (conf->runas[0]) {
    *v++ = "-runas";
    *v++ = (char *)conf->runas;
  }
  if (boot->qmp) { /* QMP on fd 4 (a socketpair end) */
    *v++ = "-chardev";
    *v++ = "socket,id=qmp,fd=4";
    *v++ = "-mon";
    *v++ = "chardev=qmp,mode=control";
  }
  if (boot->tap_fd >= 0) { /* an allowlist's NIC: the tap on fd 6 */
    unsigned char mac[3];
    randombytes_buf(mac, sizeof mac);
    snprintf(a->nic, sizeof a->nic, "virtio-net-device,netdev=nic,mac=52:54:00:%02x:%02x:%02x",
             mac[0], mac[1], mac[2]);
    *v++ = "-netdev";
    *v++ = "tap,id=nic,fd=6";
    *v++ = "-device";
    *v++ = a->nic;
  }
  if (boot->state_fd >= 0) { /* the saved state on fd 5 */
    *v++ = "-incoming";
    *v++ = "fd:5";
  }
  *v = NULL;
}

static int spawn(struct sbx_mv_priv *pv, char *const *argv, const int *fds, int nfds, pid_t *pid,
                 struct sbx_error *err)
{
  struct sbx_cg_spawn s = {
      .argv = argv, .envp = helper_env, .what = "microvm", .nfds = nfds, .cg = &pv->cg};
  memcpy(s.fds, fds, sizeof(int) * (size_t)nfds);
  if (sbx_cg_spawn(&spawner, &s, err) < 0)
    return -1;
  *pid = s.pid;
  return 0;
}

int sbx_mv_start(const struct sbx_mv_conf *conf, struct sbx_mv_priv *pv,
                 const struct sbx_limits *lim, const struct sbx_mv_boot *boot, int *chan_out,
                 int *qmp_out, char *cmdline_out, struct sbx_error *err)
{
  char log[PATH_MAX + 16];
  snprintf(log, sizeof log, "%s/qemu.log", pv->dir);
  _cleanup_close_ int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0)
    return sbx_err_sys(err, errno, "microvm: open %s", log);
  int link[2], chan[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) < 0)
    return sbx_err_sys(err, errno, "microvm: socketpair");
  _cleanup_close_ int link_qemu = link[0], link_relay = link[1];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0)
    return sbx_err_sys(err, errno, "microvm: socketpair");
  _cleanup_close_ int mine = chan[0], far = chan[1];
  int qmp[2] = {-1, -1};
  if (boot->qmp && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) < 0)
    return sbx_err_sys(err, errno, "microvm: socketpair");
  _cleanup_close_ int qmp_mine = qmp[0], qmp_qemu = qmp[1];
  struct qemu_args a;
  qemu_argv(conf, pv, lim, boot, &a);
  if (cmdline_out)
    snprintf(cmdline_out, SBX_MV_CMDLINE_MAX, "%s", a.append);
  /* fd 4 and 5 only when used: QEMU then owns nothing else of ours */
  int qfds[] = {null_fd,
                log_fd,
                log_fd,
                link_qemu,
                boot->qmp ? qmp_qemu : null_fd,
                boot->state_fd >= 0 ? boot->state_fd : null_fd,
                boot->tap_fd >= 0 ? boot->tap_fd : null_fd};
  if (spawn(pv, a.argv, qfds, 7, &pv->qemu_pid, err) < 0)
    return -1;
  char *relay[] = {(char *)conf->helper, "relay", "--chan-fd", "3", "--link-fd", "4", NULL};
  int rfds[] = {null_fd, log_fd, log_fd, far, link_relay};
  if (spawn(pv, relay, rfds, 5, &pv->relay_pid, err) < 0)
    return -1;
  *chan_out = steal_fd(&mine); /* EOF on it if the relay or QEMU dies */
  if (qmp_out)
    *qmp_out = boot->qmp ? steal_fd(&qmp_mine) : -1;
  return 0;
}

/* The last line of a file that says something (not blank). */
static void last_line(const char *path, char *out, size_t len)
{
  char buf[4096];
  out[0] = '\0';
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  off_t end = lseek(fd, 0, SEEK_END);
  off_t from = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, from);
  if (n <= 0)
    return;
  buf[n] = '\0';
  char *save = NULL;
  for (char *line = strtok_r(buf, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save))
    if (strspn(line, " \t") < strlen(line))
      snprintf(out, len, "%s", line);
}

void sbx_mv_explain(const struct sbx_mv_priv *pv, struct sbx_error *err)
{
  char path[PATH_MAX + 16], line[160];
  const char *files[] = {"console.log", "qemu.log"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", pv->dir, files[i]);
    last_line(path, line, sizeof line);
    size_t n = strlen(err->msg);
    if (line[0] && n + 24 < sizeof err->msg)
      snprintf(err->msg + n, sizeof err->msg - n, " (%s: %s)", i ? "qemu" : "guest console",
               line);
  }
}
