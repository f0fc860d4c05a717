/* relay_guest.c — the guest side of a microVM link: for each channel the
 * host OPENs, the same kind of object made here (a pipe, a socketpair, a
 * memfd), one end kept by the relay and the other handed to sbx-init with
 * the message that names it; and the records sbx-init wrote into a memfd,
 * sent back before the reply that tells the daemon to read them. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "init/proto.h"
#include "vm/relay_int.h"
#include "vm/text.h"

/* Makes the object: ends[0] stays with the relay, ends[1] is sbx-init's. */
static int make_object(uint8_t klass, uint64_t size, int ends[2])
{
  int p[2];
  switch (klass) {
  case SBX_LINK_CH_IN: /* sbx-init reads: it gets the read end */
    if (pipe2(p, O_CLOEXEC) < 0)
      return -1;
    ends[0] = p[1], ends[1] = p[0];
    return 0;
  case SBX_LINK_CH_OUT:
    if (pipe2(p, O_CLOEXEC) < 0)
      return -1;
    ends[0] = p[0], ends[1] = p[1];
    return 0;
  case SBX_LINK_CH_STREAM:
  case SBX_LINK_CH_SEQ:
    if (socketpair(AF_UNIX,
                   (klass == SBX_LINK_CH_STREAM ? SOCK_STREAM : SOCK_SEQPACKET) | SOCK_CLOEXEC,
                   0, p) < 0)
      return -1;
    ends[0] = p[0], ends[1] = p[1];
    return 0;
  case SBX_LINK_CH_FILE_IN:
  case SBX_LINK_CH_FILE_OUT:
    ends[0] = memfd_create("sbx-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (ends[0] < 0)
      return -1;
    /* Sized and sealed as the daemon's own (init/proto.h: records cannot
     * grow the file); both ends are one open file. */
    if (ftruncate(ends[0], (off_t)size) < 0 ||
        (klass == SBX_LINK_CH_FILE_OUT &&
         fcntl(ends[0], F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK) < 0) ||
        (ends[1] = fcntl(ends[0], F_DUPFD_CLOEXEC, 0)) < 0) {
      close(ends[0]);
      return -1;
    }
    return 0;
  default:
    errno = EINVAL;
    return -1;
  }
}

int sbx_relay_guest_open(struct relay *r, uint32_t id, uint8_t klass, uint64_t size)
{
  if (id == 0 || id >= SBX_LINK_MAX_CHANNELS || r->ch[id].used || klass < SBX_LINK_CH_IN ||
      klass > SBX_LINK_CH_FILE_OUT || size > SBX_LINK_MAX_FILE ||
      (size && klass != SBX_LINK_CH_FILE_IN && klass != SBX_LINK_CH_FILE_OUT))
    return -1;
  int ends[2];
  if (make_object(klass, size, ends) < 0) {
    sbx_relay_fail(r, "cannot make a channel's object");
    return -1;
  }
  struct chan *c = sbx_relay_chan_init(r, id, klass, ends[0]);
  c->far = ends[1];
  c->size = size;
  if (klass != SBX_LINK_CH_FILE_IN && klass != SBX_LINK_CH_FILE_OUT)
    fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK);
  return 0;
}

/* The length worth sending: up to the last non-zero byte (records start at
 * offset 0 and the rest of the file is zeros). */
static uint64_t used_length(int fd, uint64_t size)
{
  uint8_t buf[4096];
  uint64_t end = 0;
  for (uint64_t at = 0; at < size;) {
    size_t want = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
    ssize_t n = pread(fd, buf, want, (off_t)at);
    if (n <= 0)
      break;
    for (ssize_t i = n; i > 0; i--)
      if (buf[i - 1]) {
        end = at + (uint64_t)i;
        break;
      }
    at += (uint64_t)n;
  }
  return end;
}

static void flush_file(struct relay *r, struct chan *c)
{
  uint32_t id = (uint32_t)(c - r->ch);
  uint64_t end = used_length(c->fd, c->size);
  uint8_t buf[SBX_LINK_DATA_CHUNK];
  for (uint64_t at = 0; at < end;) {
    size_t want = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
    ssize_t n = pread(c->fd, buf, want, (off_t)at);
    if (n <= 0)
      break;
    sbx_relay_emit(r, SBX_LINK_DATA, 0, id, buf, (size_t)n, 0);
    at += (uint64_t)n;
  }
  sbx_relay_emit(r, SBX_LINK_EOF, 0, id, NULL, 0, 0);
  c->rd_done = true;
  sbx_relay_settle(r, c);
}

void sbx_relay_guest_flush_files(struct relay *r, uint32_t id)
{
  for (uint32_t i = 1; i < SBX_LINK_MAX_CHANNELS; i++) {
    struct chan *c = &r->ch[i];
    if (c->used && c->klass == SBX_LINK_CH_FILE_OUT && c->has_req && c->req_id == id &&
        c->far < 0 && !c->rd_done)
      flush_file(r, c);
  }
}

/* The oom_kill counter of /proc/vmstat (0 when unreadable). */
static uint64_t guest_oom_kills(int fd)
{
  char buf[8192];
  ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *p = strstr(buf, "\noom_kill ");
  return p ? strtoull(p + 10, NULL, 10) : 0;
}

/* A fresh identity for a restored guest (SBX_LINK_MSG_IDENTITY): 0 or an
 * errno. */
static int take_identity(const uint8_t *p, size_t n)
{
  struct {
    int entropy_count, buf_size;
    uint8_t buf[32];
  } seed = {256, 32, {0}};
  int64_t ns;
  uint32_t hlen;
  if (n < 32 + 8 + 4)
    return EINVAL;
  memcpy(seed.buf, p, 32);
  memcpy(&ns, p + 32, 8);
  memcpy(&hlen, p + 40, 4);
  if (hlen == 0 || hlen > 64 || n != 44 + (size_t)hlen + 1 || p[44 + hlen] != '\0' ||
      memchr(p + 44, '\0', hlen))
    return EINVAL;
  int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
  int e = 0;
  if (fd < 0 || ioctl(fd, RNDADDENTROPY, &seed) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
    e = errno;
  if (fd >= 0)
    close(fd);
  explicit_bzero(&seed, sizeof seed);
  struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
  if (!e &&
      (clock_settime(CLOCK_REALTIME, &ts) < 0 || sethostname((const char *)p + 44, hlen) < 0))
    e = errno;
  return e;
}

bool sbx_relay_guest_answer(struct relay *r, const uint8_t *dgram, size_t n)
{
  struct sbx_proto_hdr h;
  if (n < sizeof h)
    return false;
  memcpy(&h, dgram, sizeof h);
  if (h.type != SBX_LINK_MSG_OOM_KILLS && h.type != SBX_LINK_MSG_IDENTITY)
    return false;
  struct {
    uint32_t nids;
    struct sbx_proto_hdr h;
    uint64_t value;
  } __attribute__((packed)) reply = {0, {.type = SBX_MSG_OK, .id = h.id, .len = 8}, 0};
  if (h.type == SBX_LINK_MSG_OOM_KILLS) {
    r->kernel_kills = guest_oom_kills(r->vmstat_fd); /* a stall after this is news */
    reply.value = r->kernel_kills + r->pressure_kills;
  } else {
    int e = take_identity(dgram + sizeof h, n - sizeof h);
    if (e) { /* ERR{i32 errno}: the same 8 bytes' room, 4 used */
      reply.h.type = SBX_MSG_ERR;
      reply.h.len = 4;
      reply.value = (uint32_t)e;
    }
  }
  size_t len = sizeof reply - (reply.h.len == 4 ? 4 : 0);
  struct chan *c = r->ch;
  if (c->send_avail < len)
    return true; /* no room: the daemon's wait times out, as with a stalled guest */
  c->send_avail -= (uint32_t)len;
  sbx_relay_emit(r, SBX_LINK_MSG, 0, 0, &reply, len, 0);
  return true;
}

/* ---- memory stalls ----------------------------------------------------
 * Under a guest kernel with little memory left, a workload that keeps
 * allocating makes the kernel reclaim and refault the root image's page
 * cache for a long while before its OOM killer fires — minutes under
 * TCG, past any exec timeout.  A PSI trigger (the kernel's own stall
 * accounting, as systemd-oomd and Android's lmkd use) tells PID 1 when
 * every task was stalled on memory for half of a second; it then kills
 * the biggest workload process, as the OOM killer would have, and
 * counts it with the kernel's OOM kills (SBX_LINK_MSG_OOM_KILLS) — unless
 * the stall is already being ended (the kernel killed since, memory is
 * available again, the last victim still exiting): one hog, one kill. */

#define STALL_US 500000   /* "full" stall within … */
#define WINDOW_US 1000000 /* … this window */

void sbx_relay_guest_pressure_arm(struct relay *r)
{
  char trig[48];
  int fd = open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  snprintf(trig, sizeof trig, "full %u %u", STALL_US, WINDOW_US);
  if (fd >= 0 && write(fd, trig, strlen(trig) + 1) < 0) {
    close(fd);
    fd = -1;
  }
  r->pressure_fd = fd; /* -1: no PSI here; the kernel's OOM killer alone */
}

/* The parent of pid (0 when unknown). */
static pid_t getppid_of(pid_t pid)
{
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (sbx_vm_read_text(path, buf, sizeof buf) < 0)
    return 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces and parens */
  int ppid = 0;
  return p && sscanf(p + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : 0;
}

/* The resident pages of /proc/<name>, 0 for kernel threads and PID 1. */
static uint64_t resident(const char *name)
{
  char path[64], buf[128];
  snprintf(path, sizeof path, "/proc/%s/statm", name);
  if (sbx_vm_read_text(path, buf, sizeof buf) < 0)
    return 0;
  unsigned long long size, rss;
  return sscanf(buf, "%llu %llu", &size, &rss) == 2 ? rss : 0;
}

/* The guest's RAM and what is available of it, KiB (0 when unreadable). */
static void meminfo(uint64_t *total, uint64_t *avail)
{
  char buf[4096];
  *total = *avail = 0;
  if (sbx_vm_read_text("/proc/meminfo", buf, sizeof buf) < 0)
    return;
  const char *t = strstr(buf, "MemTotal:"), *a = strstr(buf, "\nMemAvailable:");
  if (t && a) {
    *total = strtoull(t + 9, NULL, 10);
    *avail = strtoull(a + 14, NULL, 10);
  }
}

/* The workload process with the most resident memory, and that, KiB. */
static pid_t biggest_workload(uint64_t *kib)
{
  DIR *d = opendir("/proc");
  struct dirent *de;
  pid_t victim = 0, self = getpid();
  uint64_t most = 0;
  while (d && (de = readdir(d))) {
    pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
    /* never PID 1 (this relay) or sbx-init (its child: the daemon's
     * channel), only the workload's processes */
    if (pid <= 1 || pid == self || getppid_of(pid) == self)
      continue;
    uint64_t rss = resident(de->d_name);
    if (rss > most) {
      most = rss;
      victim = pid;
    }
  }
  if (d)
    closedir(d);
  *kib = most * ((uint64_t)sysconf(_SC_PAGESIZE) / 1024);
  return victim;
}

/* A stall trigger reports the window behind it, and scanning /proc under
 * the stall takes a while: the kernel's OOM killer (or an earlier kill
 * here) may have ended the hog by then, and the biggest process left is
 * a bystander (measured: the shell that ran the hog, one exec in two).
 * So a kill needs memory still short (MemAvailable under an eighth of
 * RAM), no kernel OOM kill since the last look, the last victim gone, and
 * a victim that holds a sixteenth of RAM itself. */
void sbx_relay_guest_pressure(struct relay *r)
{
  uint64_t kernel = guest_oom_kills(r->vmstat_fd), total, avail, kib;
  bool kernel_acted = kernel != r->kernel_kills;
  r->kernel_kills = kernel;
  char last[16];
  snprintf(last, sizeof last, "%d", (int)r->pressure_victim);
  meminfo(&total, &avail);
  if (kernel_acted || avail >= total / 8 || (r->pressure_victim > 0 && resident(last) > 0))
    return;
  pid_t victim = biggest_workload(&kib);
  if (victim <= 0 || kib < total / 16 || guest_oom_kills(r->vmstat_fd) != kernel)
    return;
  if (kill(victim, SIGKILL) == 0) {
    r->pressure_kills++;
    r->pressure_victim = victim;
  }
}
