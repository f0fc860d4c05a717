/* caps.c — credentials and capabilities (isolation.md §1 E1–E3).
 *
 * Order matters: the bounding set can only be dropped while we still hold
 * CAP_SETPCAP (as root of the namespace), so it goes first; then gid, then
 * uid (the switch away from uid 0 clears permitted/effective); then every
 * set is zeroed explicitly, inheritable included (CVE-2022-27650,
 * CVE-2022-24769), and ambient cleared; then no_new_privs, which makes
 * setuid bits and file caps inert and lets us install seccomp unprivileged.
 * Supplementary groups cannot be set here (setgroups is denied by the
 * parent); the spawner thread already has none, which we verify.
 * Raw syscalls: see iso.h.  Child-side. */
#include "isolation/iso.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int sbx_caps_drop_bounding(void)
{
  for (int cap = 0; cap <= 63; cap++) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
      break; /* past CAP_LAST_CAP of this kernel */
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
      return -1;
  }
  return 0;
}

int sbx_caps_drop_creds(uid_t uid, gid_t gid)
{
  if (uid == 0 || gid == 0) {
    errno = EPERM; /* never root inside, whatever asked for it */
    return -1;
  }
  if (syscall(SYS_getgroups, 0, NULL) != 0) {
    errno = EPERM; /* the daemon's supplementary groups must never get in */
    return -1;
  }
  if (syscall(SYS_setresgid, gid, gid, gid) < 0)
    return -1;
  return (int)syscall(SYS_setresuid, uid, uid, uid);
}

int sbx_caps_clear(void)
{
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[2] = {{0, 0, 0}, {0, 0, 0}};
  if (syscall(SYS_capset, &h, d) < 0)
    return -1;
  return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

int sbx_caps_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }
