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
 * Argument checks (clone flags, socket families, ioctl TIOCSTI/TIOCLINUX,
 * personality) live in a second, hand-written filter (args_filter) that
 * compares int arguments on their low 32 bits only (CVE-2019-10063: high
 * bits set in an ioctl cmd bypassed a 64-bit compare while the kernel
 * truncates to int).  It also checks the arch and the x32 bit itself.
 *
 * Built once in the daemon and exported as raw BPF: the child runs after
 * a raw clone3 and must not call into libseccomp (heap, locks). */
#include "isolation/iso.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <stddef.h>
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
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "clock_adjtime",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_requeue",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "getxattrat",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listmount",
    "listxattr",
    "listxattrat",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "mseal",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "removexattrat",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setxattr",
    "setxattrat",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "socketpair",
    "splice",
    "stat",
    "statfs",
    "statmount",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "uretprobe",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "write",
    "writev",
    "arch_prctl",
    "modify_ldt",
    NULL,
};

/* Known-dangerous: EPERM, so "blocked by policy" is visible. */
static const char *const deny_names[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "mount",
    "umount2",
    "fsopen",
    "fsconfig",
    "fsmount",
    "move_mount",
    "open_tree",
    "fspick",
    "mount_setattr",
    "pivot_root",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "chroot",
    "kcmp",
    "pidfd_getfd",
    "memfd_secret",
    "reboot",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "vhangup",
    "fanotify_init",
    "process_madvise",
    "mbind",
    "set_mempolicy",
    "get_mempolicy",
    "move_pages",
    "migrate_pages",
    "lsm_set_self_attr",
    "uselib",
    "_sysctl",
    "nfsservctl",
    "ustat",
    "sysfs",
    NULL,
};

#define NS_FLAGS 0x7E020000u /* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */

static struct sock_fprog prog;
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* The argument checks, as a small hand-written filter stacked with the
 * libseccomp one (the kernel runs both; the most restrictive verdict
 * wins).  libseccomp cannot say "allow unless low32(arg) ∈ S" without a
 * rule per bit pattern, and its rule tree explodes on those.  Every load
 * is the low 32-bit word of the argument (little-endian x86_64), which is
 * what the kernel uses for these int/unsigned-int arguments. */
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define JEQ(v, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (v), (t), (f))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ALLOW RET(SECCOMP_RET_ALLOW)
#define EPERM_ RET(SECCOMP_RET_ERRNO | EPERM)

/* Jump offsets count instructions after the jump; keep the layout
 * comments in sync when editing. */
static struct sock_filter args_filter[] = {
    LD(offsetof(struct seccomp_data, arch)),
    JEQ(AUDIT_ARCH_X86_64, 1, 0),
    RET(SECCOMP_RET_KILL_PROCESS), /* i386 (int 0x80) and anything foreign */
    LD(offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
    RET(SECCOMP_RET_KILL_PROCESS), /* x32 */
    JEQ(__NR_ioctl, 5, 0),
    JEQ(__NR_personality, 9, 0),
    JEQ(__NR_socket, 16, 0),
    JEQ(__NR_socketpair, 25, 0),
    JEQ(__NR_clone, 28, 0),
    ALLOW,
    /* ioctl: TIOCSTI / TIOCLINUX (CVE-2017-5226, CVE-2019-10063) */
    LD(ARG_LO(1)),
    JEQ(TIOCSTI, 2, 0),
    JEQ(TIOCLINUX, 1, 0),
    ALLOW,
    EPERM_,
    /* personality: Docker's harmless values only */
    LD(ARG_LO(0)),
    JEQ(0x0, 5, 0),
    JEQ(0x8, 4, 0),
    JEQ(0x20000, 3, 0),
    JEQ(0x20008, 2, 0),
    JEQ(0xffffffffu, 1, 0),
    EPERM_,
    ALLOW,
    /* socket: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK+NETLINK_ROUTE */
    LD(ARG_LO(0)),
    JEQ(AF_UNIX, 6, 0),
    JEQ(AF_INET, 5, 0),
    JEQ(AF_INET6, 4, 0),
    JEQ(AF_NETLINK, 1, 0),
    EPERM_,
    LD(ARG_LO(2)),
    JEQ(NETLINK_ROUTE, 0, 1),
    ALLOW,
    EPERM_,
    /* socketpair: AF_UNIX only */
    LD(ARG_LO(0)),
    JEQ(AF_UNIX, 0, 1),
    ALLOW,
    EPERM_,
    /* clone: no namespace flags (clone3 is ENOSYS in the main filter) */
    LD(ARG_LO(0)),
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1),
    EPERM_,
    ALLOW,
};
static const struct sock_fprog args_prog = {.len = sizeof args_filter / sizeof args_filter[0],
                                            .filter = args_filter};

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
  /* checked by args_filter; clone3 stays at the default (ENOSYS) */
  static const char *const arg_checked[] = {"ioctl",      "personality", "socket",
                                            "socketpair", "clone",       NULL};
  if (e == 0)
    e = add_names(ctx, SCMP_ACT_ALLOW, arg_checked);
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

const struct sock_fprog *sbx_seccomp_prog(void) { return prog.filter ? &prog : NULL; }

/* Child-side: no_new_privs is already set (caps.c). */
int sbx_seccomp_apply(void)
{
  if (!prog.filter) {
    errno = EINVAL;
    return -1;
  }
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &args_prog) < 0)
    return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
