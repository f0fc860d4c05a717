/* seccomp.c — the default-deny syscall filter, the last step before exec
 * (isolation.md §1 E10; Docker's moby/profiles seccomp/default.json).
 *
 * Policy, consistently:
 *   - default action ERRNO(ENOSYS): a syscall we do not know "does not
 *     exist here", so newer libcs fall back (faccessat2, clone3, …);
 *   - the dangerous calls we know are denied explicitly with ERRNO(EPERM)
 *     (as Docker does), so a probe can tell "blocked by policy";
 *   - clone3 → ENOSYS (its flags live in memory BPF cannot read; glibc
 *     falls back to clone, whose flags it can);
 *   - foreign architectures (i386 via int 0x80, x32) kill the process:
 *     libseccomp's bad-arch action, and its x32 check on x86_64.
 * Argument filters compare int arguments on their low 32 bits only
 * (CVE-2019-10063: high bits set in an ioctl cmd bypassed a 64-bit
 * compare while the kernel truncates to int).  libseccomp lets the least
 * specific rule win when an unconditional and a conditional rule share a
 * syscall, so "allow unless value ∈ S" is written as the complement of S,
 * bit by bit, with MASKED_EQ rules (add_not_in()).
 *
 * Built once in the daemon and exported as raw BPF: the child runs after
 * a raw clone3 and must not call into libseccomp (heap, locks). */
#include "isolation/iso.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "common/cleanup.h"

/* Docker's base allowlist, minus memfd_secret and name_to_handle_at
 * (isolation.md §1 "Recommendation for the shared-kernel tier"). */
static const char *const allow_names[] = {
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "clock_adjtime", "clock_getres", "clock_gettime",
    "clock_nanosleep", "close", "close_range", "connect", "copy_file_range", "creat", "dup",
    "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
    "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat",
    "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fanotify_mark",
    "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync",
    "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs",
    "fsync", "ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
    "futimesat", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid",
    "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid",
    "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list",
    "getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid",
    "gettimeofday", "getuid", "getxattr", "getxattrat", "inotify_add_watch", "inotify_init",
    "inotify_init1", "inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents",
    "io_pgetevents", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "kill",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown",
    "lgetxattr", "link", "linkat", "listen", "listmount", "listxattr", "listxattrat", "llistxattr",
    "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack", "membarrier",
    "memfd_create", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2",
    "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
    "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd",
    "msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open", "openat",
    "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2",
    "prlimit64", "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read",
    "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
    "remap_file_pages", "removexattr", "removexattrat", "rename", "renameat", "renameat2",
    "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
    "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
    "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select",
    "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto",
    "setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority",
    "setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid",
    "setsockopt", "set_thread_area", "set_tid_address", "setuid", "setxattr", "setxattrat",
    "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4",
    "socketpair", "splice", "stat", "statfs", "statmount", "statx", "symlink", "symlinkat", "sync",
    "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
    "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname",
    "unlink", "unlinkat", "uretprobe", "utime", "utimensat", "utimes", "vfork", "vmsplice",
    "wait4", "waitid", "write", "writev", "arch_prctl", "modify_ldt", NULL,
};

/* Known-dangerous: EPERM, so "blocked by policy" is visible. */
static const char *const deny_names[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd", "bpf", "keyctl", "add_key", "request_key",
    "perf_event_open", "mount", "umount2", "fsopen", "fsconfig", "fsmount", "move_mount",
    "open_tree", "fspick", "mount_setattr", "pivot_root", "unshare", "setns", "kexec_load",
    "kexec_file_load", "open_by_handle_at", "name_to_handle_at", "chroot", "kcmp", "pidfd_getfd",
    "memfd_secret", "reboot", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
    "acct", "settimeofday", "clock_settime", "syslog", "quotactl", "quotactl_fd", "lookup_dcookie",
    "sethostname", "setdomainname", "iopl", "ioperm", "vhangup", "fanotify_init",
    "process_madvise", "mbind", "set_mempolicy", "get_mempolicy", "move_pages", "migrate_pages",
    "lsm_set_self_attr", "uselib", "_sysctl", "nfsservctl", "ustat", "sysfs", NULL,
};

#define NS_FLAGS 0x7E020000ull /* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
#define LOW32 0xffffffffull

static struct sock_fprog prog;
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names)
{
  for (int i = 0; names[i]; i++) {
    int nr = seccomp_syscall_resolve_name(names[i]);
    if (nr == __NR_SCMP_ERROR)
      continue; /* unknown to this libseccomp: the default denies it */
    int r = seccomp_rule_add(ctx, action, nr, 0);
    if (r < 0 && r != -EEXIST)
      return r;
  }
  return 0;
}

/* Rules with `action` matching exactly when low32(arg) ∉ vals (plus an
 * optional extra comparison ANDed in).  v ∈ vals iff v agrees with them on
 * every bit where they all agree AND its pattern on the other bits is one
 * of theirs, so the complement is: one rule per common bit (differs there)
 * plus one rule per non-member pattern of the differing bits. */
static int add_not_in(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
                      const uint32_t *vals, int n, const struct scmp_arg_cmp *extra)
{
  uint32_t same = 0xffffffffu;
  for (int i = 1; i < n; i++)
    same &= ~(vals[0] ^ vals[i]);
  for (int b = 0; b < 32; b++) {
    uint32_t bit = 1u << b;
    if (!(same & bit))
      continue;
    struct scmp_arg_cmp c = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bit, (~vals[0]) & bit);
    int r = extra ? seccomp_rule_add(ctx, action, nr, 2, c, *extra) : seccomp_rule_add(ctx, action, nr, 1, c);
    if (r < 0)
      return r;
  }
  uint32_t diff = ~same;
  /* enumerate every sub-pattern of diff (diff has few bits here) */
  for (uint32_t pat = diff;; pat = (pat - 1) & diff) {
    bool member = false;
    for (int i = 0; i < n; i++)
      member |= (vals[i] & diff) == pat;
    if (!member) {
      struct scmp_arg_cmp c = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, diff, pat);
      int r = extra ? seccomp_rule_add(ctx, action, nr, 2, c, *extra) : seccomp_rule_add(ctx, action, nr, 1, c);
      if (r < 0)
        return r;
    }
    if (pat == 0)
      break;
  }
  return 0;
}

static int add_in(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg, const uint32_t *vals,
                  int n, const struct scmp_arg_cmp *extra)
{
  for (int i = 0; i < n; i++) {
    struct scmp_arg_cmp c = SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, LOW32, vals[i]);
    int r = extra ? seccomp_rule_add(ctx, action, nr, 2, c, *extra) : seccomp_rule_add(ctx, action, nr, 1, c);
    if (r < 0)
      return r;
  }
  return 0;
}

static int add_clone(scmp_filter_ctx ctx)
{
  int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
  for (int b = 0; b < 32 && r == 0; b++)
    if (NS_FLAGS & (1ull << b))
      r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, 1ull << b, 1ull << b));
  /* clone3 → ENOSYS is the default action (libseccomp refuses a rule
   * equal to the default); it is deliberately in neither list. */
  return r;
}

/* Families outside the allowlist fall to the default (ENOSYS): a
 * complement-of-set rule on two arguments makes libseccomp's tree blow up,
 * and "no such socket support here" is the truth for the sandbox. */
static int add_socket(scmp_filter_ctx ctx)
{
  static const uint32_t fams[] = {AF_UNIX, AF_INET, AF_INET6};
  static const uint32_t route[] = {NETLINK_ROUTE};
  static const uint32_t unix_only[] = {AF_UNIX};
  struct scmp_arg_cmp is_netlink = SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK);
  int r = add_in(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 0, fams, 3, NULL);
  if (r == 0)
    r = add_in(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, route, 1, &is_netlink);
  if (r == 0)
    r = add_in(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 0, unix_only, 1, NULL);
  return r;
}

static int add_ioctl_personality(scmp_filter_ctx ctx)
{
  static const uint32_t tty_inject[] = {TIOCSTI, TIOCLINUX};
  /* Docker's harmless personalities: PER_LINUX, PER_LINUX32, UNAME26 (+32), query. */
  static const uint32_t pers[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffffu};
  int r = add_not_in(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, tty_inject, 2, NULL);
  if (r == 0)
    r = add_in(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, tty_inject, 2, NULL);
  if (r == 0)
    r = add_in(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 0, pers, 5, NULL);
  if (r == 0)
    r = add_not_in(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 0, pers, 5, NULL);
  return r;
}

static int export_bpf(scmp_filter_ctx ctx, struct sbx_error *err)
{
  _cleanup_close_ int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys(err, errno, "seccomp: memfd_create");
  int r = seccomp_export_bpf(ctx, fd);
  if (r < 0)
    return sbx_err_sys(err, -r, "seccomp: export bpf");
  struct stat st;
  if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter))
    return sbx_err_sys(err, EINVAL, "seccomp: bad bpf size");
  struct sock_filter *f = malloc((size_t)st.st_size);
  if (!f || pread(fd, f, (size_t)st.st_size, 0) != st.st_size) {
    free(f);
    return sbx_err_sys(err, errno ? errno : EIO, "seccomp: read bpf");
  }
  prog.len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
  prog.filter = f;
  return 0;
}

int sbx_seccomp_build(struct sbx_error *err)
{
  pthread_mutex_lock(&build_lock);
  if (prog.filter) {
    pthread_mutex_unlock(&build_lock);
    return 0;
  }
  int r = -1;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
  if (!ctx) {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "seccomp: seccomp_init failed");
    goto out;
  }
  int e = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (e == 0)
    e = add_names(ctx, SCMP_ACT_ALLOW, allow_names);
  if (e == 0)
    e = add_names(ctx, SCMP_ACT_ERRNO(EPERM), deny_names);
  if (e == 0)
    e = add_clone(ctx);
  if (e == 0)
    e = add_socket(ctx);
  if (e == 0)
    e = add_ioctl_personality(ctx);
  if (e < 0) {
    sbx_err_sys(err, -e, "seccomp: building the filter");
    goto out;
  }
  r = export_bpf(ctx, err);
out:
  if (ctx)
    seccomp_release(ctx);
  pthread_mutex_unlock(&build_lock);
  return r;
}

const struct sock_fprog *sbx_seccomp_prog(void)
{
  return prog.filter ? &prog : NULL;
}

/* Child-side: no_new_privs is already set (caps.c). */
int sbx_seccomp_apply(void)
{
  if (!prog.filter) {
    errno = EINVAL;
    return -1;
  }
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
