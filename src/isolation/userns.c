/* userns.c — user namespace ids: each sandbox gets its own block of 65536
 * unprivileged host uids/gids (isolate's one-uid-per-box model, with a
 * whole range so root inside can be mapped for setup), so that even a
 * process that escaped its namespaces cannot signal, ptrace or read
 * another sandbox's processes or files.  Inside: 0 = setup root (never
 * used by workloads), 1000 = the sandbox user.
 *
 * The parent (daemon, real root) writes the maps; setgroups is denied so
 * nothing inside can ever change its supplementary groups (the spawner
 * thread has already dropped the daemon's own, see spawn.c). */
#include "isolation/iso.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

#define MAX_SLOTS 4096

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static uid_t slot_base = 0;
static unsigned slot_count = 0;
static unsigned char slot_used[MAX_SLOTS];
static unsigned slot_next;

static void configure_from_env(void)
{
  if (slot_count)
    return;
  const char *b = getenv("SANDBOXD_UID_BASE");
  const char *n = getenv("SANDBOXD_UID_SLOTS");
  slot_base = b ? (uid_t)strtoul(b, NULL, 10) : 200000;
  slot_count = n ? (unsigned)strtoul(n, NULL, 10) : 1024;
  if (slot_count == 0 || slot_count > MAX_SLOTS)
    slot_count = 1024;
}

void sbx_userns_configure(uid_t base, unsigned slots)
{
  pthread_mutex_lock(&slot_lock);
  slot_base = base;
  slot_count = slots && slots <= MAX_SLOTS ? slots : 1024;
  pthread_mutex_unlock(&slot_lock);
}

/* A slot is claimed in this process (slot_used) and across processes by
 * an flock on /run/sandboxd/uid-slots/<base>.<slot>: two daemons on one host
 * never hand the same host uid range to two sandboxes.  The lock fd lives
 * as long as the slot; the kernel drops it if the daemon dies. */
#define SLOT_LOCK_DIR "/run/sandboxd/uid-slots"
static int slot_fd[MAX_SLOTS];

static int claim_host_wide(unsigned s)
{
  char path[128];
  snprintf(path, sizeof path, SLOT_LOCK_DIR "/%u.%u", (unsigned)slot_base, s);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ENOENT && sbx_mkdir_p(SLOT_LOCK_DIR, 0700) == 0)
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int sbx_userns_slot_alloc(uid_t *base_out, bool lowest, struct sbx_error *err)
{
  pthread_mutex_lock(&slot_lock);
  configure_from_env();
  /* Round-robin rather than lowest-free, so a just-freed range (whose
   * last process may be a zombie for a moment more) is reused last.
   * lowest: an image sandbox on shifted layer copies (one per layer and
   * range, shift.c), which keeps the copies to the number of such
   * sandboxes running at once; its range is freed only after its init was
   * reaped, and the pid namespace died with it. */
  for (unsigned i = 0; i < slot_count; i++) {
    unsigned s = lowest ? i : (slot_next + i) % slot_count;
    if (slot_used[s])
      continue;
    int fd = claim_host_wide(s);
    if (fd < 0)
      continue; /* another daemon holds it */
    slot_used[s] = 1;
    slot_fd[s] = fd;
    if (!lowest)
      slot_next = s + 1;
    *base_out = slot_base + (uid_t)s * SBX_ISO_UID_RANGE;
    pthread_mutex_unlock(&slot_lock);
    return 0;
  }
  pthread_mutex_unlock(&slot_lock);
  return sbx_err_set(err, SBX_E_QUOTA, 0, "userns: all %u host uid ranges are in use",
                     slot_count);
}

void sbx_userns_slot_free(uid_t base)
{
  pthread_mutex_lock(&slot_lock);
  if (base >= slot_base) {
    unsigned s = (base - slot_base) / SBX_ISO_UID_RANGE;
    if (s < MAX_SLOTS && slot_used[s]) {
      slot_used[s] = 0;
      close(slot_fd[s]);
    }
  }
  pthread_mutex_unlock(&slot_lock);
}

static int write_proc(pid_t pid, const char *file, const char *data, struct sbx_error *err)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys(err, errno, "userns: open %s", path);
  if (write(fd, data, strlen(data)) != (ssize_t)strlen(data))
    return sbx_err_sys(err, errno, "userns: write %s", path);
  return 0;
}

int sbx_userns_write_maps(pid_t pid, uid_t base, struct sbx_error *err)
{
  char map[64];
  snprintf(map, sizeof map, "0 %u %u\n", (unsigned)base, SBX_ISO_UID_RANGE);
  if (write_proc(pid, "uid_map", map, err) < 0)
    return -1;
  if (write_proc(pid, "setgroups", "deny", err) < 0)
    return -1;
  return write_proc(pid, "gid_map", map, err);
}

/* Child: the maps are written; take uid/gid 0 of the namespace so files we
 * create during setup have a mapped owner (an unmapped fsuid gives
 * EOVERFLOW).  Raw syscalls: glibc's setxid wrappers would signal the
 * parent's other threads, which do not exist in this child. */
int sbx_userns_child_become_root(void)
{
  if (syscall(SYS_setresgid, 0, 0, 0) < 0)
    return -1;
  return (int)syscall(SYS_setresuid, 0, 0, 0);
}
