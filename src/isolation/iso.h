/* iso.h — the isolation module's internal API: the shared-kernel wall that
 * the container driver (runtime/drivers/container.c) builds its sandboxes
 * with.  One file per concern (userns.c mount.c pid.c net.c cgroup.c caps.c
 * seccomp.c rlimit.c fds.c), one ordered chain (chain.c), the parent-side
 * spawner (spawn.c), a box = one live sandbox's host-side handles (box.c),
 * the warm pool (pool.c) and an image's copy-on-write root (overlay.c).
 *
 * Split of work across clone:
 *   parent (daemon)  prepares everything that needs the heap or libc locks
 *                    (strings, the seccomp BPF, the cgroup), clones from the
 *                    dedicated spawner thread, writes uid/gid maps, moves the
 *                    child into its cgroup and releases it;
 *   child            runs chain.c's ordered steps with raw syscalls only (a
 *                    raw clone3 in a threaded process leaves glibc's locks and
 *                    thread list in an undefined state: no malloc, no stdio,
 *                    no libseccomp, no glibc setxid wrappers).
 * A failing child step writes {step, errno} on the sync socket and exits;
 * the parent turns that into an error naming the step.  A successful
 * execveat closes the CLOEXEC sync socket: EOF means "the wall is up". */
#ifndef SBX_ISOLATION_ISO_H
#define SBX_ISOLATION_ISO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* What the wall enforces on one sandbox; 0 is "no limit" (disk: the
 * default).  Its own struct, not the driver seam's: isolation sits below
 * runtime, and the driver converts (runtime/drivers/iso_limits.h). */
struct sbx_iso_limits {
  uint64_t cpu_millis;   /* CPU quota in millicores */
  uint64_t memory_bytes; /* memory ceiling (no swap beyond it) */
  uint64_t disk_bytes;   /* size of writable /tmp + /work */
  uint64_t pids;         /* max tasks */
};

/* A cgroup's counters (sbx_cg_usage). */
struct sbx_iso_usage {
  double cpu_seconds;         /* user+system */
  uint64_t memory_peak_bytes; /* high-water mark */
  uint64_t oom_kills;         /* times the kernel's OOM killer fired in it */
  uint64_t pids_current;
  uint64_t pids_max_hits; /* times a fork failed at the pids ceiling */
};

/* Ids inside every sandbox. */
#define SBX_ISO_SANDBOX_UID 1000
#define SBX_ISO_SANDBOX_GID 1000
#define SBX_ISO_UID_RANGE 65536u /* inside ids 0..65535 are mapped */
#define SBX_ISO_DEFAULT_DISK (256ull << 20)
/* Most layers one image root may stack (overlayfs allows 500). */
#define SBX_ISO_MAX_LAYERS 128

/* ---- module setup (iso.c) ------------------------------------------- */

/* Once per process: cgroup detection, seccomp BPF, uid ranges, spawner
 * thread.  Idempotent; thread-safe.  SBX_E_RUNTIME_UNAVAILABLE with a
 * one-line reason when the host cannot build the wall at all. */
int sbx_iso_init(struct sbx_error *err);

/* /etc/resolv.conf of every sandbox built from now on (mount.c); the
 * network module sets it at start.  Default: a comment, no nameserver. */
void sbx_iso_set_resolv_conf(const char *text);
/* Writes the sandbox's own /etc files, the same under every driver, into
 * the directory etc (each created O_EXCL, 0644): for a host-root sandbox
 * passwd, group, hosts, resolv.conf, nsswitch.conf and hostname; for an
 * image (image true) only the three it gets over its own /etc: hosts,
 * resolv.conf, hostname.  resolv: resolv.conf's text, NULL for the one
 * sbx_iso_set_resolv_conf set.  Async-signal-safe.  0, or -1 with errno. */
int sbx_iso_write_etc(int etc, bool image, const char *resolv);

/* ---- user namespace ids (userns.c) ----------------------------------- */

/* Host uid base of slot n: base (default 200000) + n·65536;
 * the next free slot round-robin, or the lowest free one (lowest). */
int sbx_userns_slot_alloc(uid_t *base_out, bool lowest, struct sbx_error *err);
void sbx_userns_slot_free(uid_t base);
/* Parent side: setgroups=deny, uid_map and gid_map "0 base 65536". */
int sbx_userns_write_maps(pid_t pid, uid_t base, struct sbx_error *err);
/* Configure the slot allocator (the uid_base/uid_slots settings, tests). */
void sbx_userns_configure(uid_t base, unsigned slots);

/* ---- cgroups (cgroup.c) ---------------------------------------------- */

enum sbx_cg_version { SBX_CG_NONE, SBX_CG_V1, SBX_CG_V2 };

/* Where sandbox cgroups go.  v1: one parent dir per controller
 * (memory, pids, cpu, cpuacct, freezer; cpu and cpuacct may share one);
 * v2: one parent dir. */
struct sbx_cg_host {
  enum sbx_cg_version version;
  bool fake; /* a test tree of plain dirs: control files are created on write */
  int nctrl;
  struct {
    char name[16];    /* "memory", "pids", "cpu", "cpuacct", "freezer" or "" (v2) */
    char parent[512]; /* absolute dir that holds <leaf> dirs */
    unsigned mask;    /* SBX_CGC_* served by this hierarchy */
  } ctrl[6];
};
enum {
  SBX_CGC_MEMORY = 1u << 0,
  SBX_CGC_PIDS = 1u << 1,
  SBX_CGC_CPU = 1u << 2,
  SBX_CGC_CPUACCT = 1u << 3,
  SBX_CGC_FREEZER = 1u << 4,
};

/* A sandbox's cgroup (leaf dirs in every hierarchy). */
struct sbx_cgroup {
  const struct sbx_cg_host *host;
  char leaf[96];
  int v2_dirfd; /* v2: O_PATH|O_DIRECTORY of the leaf for CLONE_INTO_CGROUP; -1 on v1 */
  /* The OOM counter file, opened by the first sbx_cg_oom_kills and read
   * with pread from then on (closed by sbx_cg_remove), stored as fd + 1 so
   * that a zeroed struct holds none. */
  int oom_fd1;
  /* The limits last written, per group (memory, pids, CPU), so that
   * setting the same again writes nothing: each cgroupfs write is a path
   * walk, and a warm sandbox handed over with the limits it was built
   * with is the common case.  Only this struct writes them. */
  struct sbx_iso_limits set;
  bool set_known;
};

/* Detects the cgroup layout of this process.  root: "/sys/fs/cgroup" or a
 * fake tree for tests; self_cgroup: contents of /proc/self/cgroup (NULL to
 * read it); parent_name: NULL for the default parent (below). */
/* Parent cgroup name when the caller gives none ("sandboxd" until set;
 * the container driver sets the cgroup_parent setting or its per-state-dir
 * name).  Call before the first detect. */
void sbx_cg_set_default_parent(const char *name);
int sbx_cg_detect(struct sbx_cg_host *h, const char *root, const char *self_cgroup,
                  const char *mountinfo, const char *parent_name, struct sbx_error *err);
/* The process-wide host layout sbx_iso_init detected. */
const struct sbx_cg_host *sbx_cg_host_default(void);
/* Creates the leaf in every hierarchy and applies limits. */
int sbx_cg_create(const struct sbx_cg_host *h, const char *leaf,
                  const struct sbx_iso_limits *lim, struct sbx_cgroup *out,
                  struct sbx_error *err);
int sbx_cg_set_limits(struct sbx_cgroup *cg, const struct sbx_iso_limits *lim,
                      struct sbx_error *err);
/* v1: writes pid to cgroup.procs in every hierarchy (v2 enters with
 * CLONE_INTO_CGROUP, but this works there too). */
int sbx_cg_attach(struct sbx_cgroup *cg, pid_t pid, struct sbx_error *err);
int sbx_cg_usage(struct sbx_cgroup *cg, struct sbx_iso_usage *out);
/* The memory charged to the cgroup now (v2 memory.current, v1
 * memory.usage_in_bytes) and its file part: page cache and tmpfs (v2
 * memory.stat file, v1 cache). */
int sbx_cg_memory(struct sbx_cgroup *cg, uint64_t *current, uint64_t *file);
/* Only the OOM-kill counter (v1 memory.oom_control, v2 memory.events),
 * from a file kept open: safe from several threads at once. */
int sbx_cg_oom_kills(struct sbx_cgroup *cg, uint64_t *out);
/* Calls fn for every process now in the cgroup (its cgroup.procs, read
 * once); returns how many calls returned true. */
int sbx_cg_each_proc(struct sbx_cgroup *cg, bool (*fn)(pid_t pid, void *ctx), void *ctx);
/* Kills every process in the cgroup at once (v1 freezer, v2 cgroup.kill)
 * and waits up to timeout_ms for it to be empty. */
int sbx_cg_kill(struct sbx_cgroup *cg, unsigned timeout_ms, struct sbx_error *err);
/* rmdir of every leaf dir (closes v2_dirfd and the OOM counter file). */
int sbx_cg_remove(struct sbx_cgroup *cg, struct sbx_error *err);
/* Kills and removes every leaf under the parent dirs.  Returns how many. */
int sbx_cg_recover(const struct sbx_cg_host *h);
/* rmdir of the parent dirs, for a driver's shutdown once its sandboxes are
 * gone, so that one daemon's empty parents do not pile up across runs; a
 * parent still in use or already gone is left (logged at debug). */
void sbx_cg_remove_parents(const struct sbx_cg_host *h);
/* Number of leaves under the parent (first hierarchy) or -1. */
int sbx_cg_count(const struct sbx_cg_host *h);

/* ---- seccomp (seccomp.c) --------------------------------------------- */

/* The filter as a ready BPF program, built once with libseccomp. */
struct sock_fprog;
const struct sock_fprog *sbx_seccomp_prog(void);
int sbx_seccomp_build(struct sbx_error *err);

/* ---- the child-side plan and chain (chain.c et al.) ------------------ */

enum sbx_iso_step {
  SBX_STEP_NONE,
  SBX_STEP_SYNC,
  SBX_STEP_USERNS,
  SBX_STEP_CGROUPNS,
  SBX_STEP_MOUNT_PRIVATE,
  SBX_STEP_MOUNT_ROOT,
  SBX_STEP_MOUNT_IMAGE,
  SBX_STEP_MOUNT_USR,
  SBX_STEP_MOUNT_ETC,
  SBX_STEP_MOUNT_PROC,
  SBX_STEP_MOUNT_DEV,
  SBX_STEP_MOUNT_TMP,
  SBX_STEP_PIVOT,
  SBX_STEP_MOUNT_RO,
  SBX_STEP_NET,
  SBX_STEP_UTS,
  SBX_STEP_SIGNALS,
  SBX_STEP_SETSID,
  SBX_STEP_PDEATHSIG,
  SBX_STEP_RLIMIT,
  SBX_STEP_CAPS_BOUND,
  SBX_STEP_CREDS,
  SBX_STEP_CAPS,
  SBX_STEP_NNP,
  SBX_STEP_FDS,
  SBX_STEP_SECCOMP,
  SBX_STEP_EXEC,
  SBX_STEP__COUNT
};
const char *sbx_iso_step_name(enum sbx_iso_step s);

/* What the child reports on failure. */
struct sbx_iso_report {
  int32_t step;
  int32_t errnum;
};

#define SBX_PLAN_MAX_LINKS 8
#define SBX_PLAN_MAX_ROBINDS 8
/* Everything the child needs, prepared by the parent (no heap use after clone). */
struct sbx_iso_plan {
  /* fds in the parent's numbering, arranged by the child */
  int sync_fd;  /* child end of the sync socket */
  int chan_fd;  /* becomes fd 3 */
  int exec_fd;  /* sealed memfd to execveat */
  int stdio[3]; /* become fds 0..2 */
  char *const *argv;
  char *const *envp;
  /* mounts */
  char root_opts[96];
  char tmp_opts[160];
  char work_opts[160];
  int nlinks; /* top-level links recreated as on the host: bin -> usr/bin, … */
  struct {
    char name[16];
    char target[64];
  } links[SBX_PLAN_MAX_LINKS];
  int nrobinds; /* top-level dirs bound read-only (non-merged-/usr hosts) */
  char robinds[SBX_PLAN_MAX_ROBINDS][16];
  bool have_alternatives;
  bool have_ldcache;
  bool have_certs;
  /* image root: nlayers > 0 → the parent builds an overlay of
   * these dirs (lowest first) on an upper tmpfs of upper_size bytes and
   * upper_inodes inodes, and sends it with "go"; see overlay.c */
  const char *const *layers;
  size_t nlayers;
  uint64_t upper_size, upper_inodes;
  uid_t run_uid; /* the ids everything inside runs as (SBX_ISO_SANDBOX_UID/GID unless an */
  gid_t run_gid; /* image names its User) */
  /* limits */
  uint64_t nofile, nproc, fsize;
};

/* The child side: never returns.  Runs the ordered steps (chain.c). */
__attribute__((noreturn)) void sbx_iso_child(const struct sbx_iso_plan *p);

/* Child-side helpers, one file per concern.  Each returns 0, or -1 with
 * errno set, as the syscalls they wrap do. */
int sbx_userns_child_become_root(void);
/* image_fd: the detached overlay the parent sent (plan->nlayers > 0), else -1. */
int sbx_mount_build_root(const struct sbx_iso_plan *p, int image_fd, enum sbx_iso_step *step);
int sbx_mount_pivot(enum sbx_iso_step *step);
int sbx_mount_root_readonly(void);
int sbx_net_lo_up(void);
int sbx_uts_set_hostname(void);
int sbx_pid_setsid(void);
int sbx_pid_reset_signals(void);
int sbx_pid_deathsig(void);
int sbx_rlimit_apply(const struct sbx_iso_plan *p);
int sbx_caps_drop_bounding(void);
int sbx_caps_drop_creds(uid_t uid, gid_t gid);
int sbx_caps_clear(void);
int sbx_caps_no_new_privs(void);
int sbx_fds_arrange(const struct sbx_iso_plan *p, int *sync_fd, int *exec_fd);
int sbx_seccomp_apply(void);

/* ---- spawning (spawn.c) ---------------------------------------------- */

/* A running, walled child (sbx-init or, in tests, any static binary). */
struct sbx_iso_box {
  char leaf[96];
  pid_t pid;      /* host pid */
  int pidfd;      /* CLONE_PIDFD */
  int chan_fd;    /* daemon end of the child's fd 3 */
  uid_t uid_base; /* host uid of inside uid 0 */
  uint64_t disk_bytes;
  struct sbx_cgroup cg;
  bool reaped;
  int exit_status; /* wait status once reaped */
};

struct sbx_iso_spec {
  const char *leaf; /* cgroup leaf name: [a-z0-9_-] */
  struct sbx_iso_limits limits;
  int exec_fd;       /* sealed memfd copy of the binary */
  char *const *argv; /* NULL → {"sbx-init","--root","/"} */
  char *const *envp; /* NULL → empty */
  int stdio[3];      /* -1 → /dev/null */
  /* An image's unpacked layers (absolute dirs, lowest first); the
   * root is then their copy-on-write overlay instead of the host pack.
   * The caller keeps the dirs alive while the box lives. */
  const char *const *layers;
  size_t nlayers;
  uint32_t run_uid, run_gid; /* the workload's ids inside (0: SBX_ISO_SANDBOX_UID/GID) */
};

/* Builds the wall and execs the binary in it; on failure nothing is left
 * (cgroup removed, child killed and reaped, uid slot freed). */
int sbx_iso_box_create(const struct sbx_iso_spec *spec, struct sbx_iso_box **out,
                       struct sbx_error *err);
/* Kills the whole tree (cgroup), reaps, removes the cgroup; consumes box. */
void sbx_iso_box_destroy(struct sbx_iso_box *box);
/* Waits (up to timeout_ms, -1 forever) for the child to exit; 0 and
 * box->exit_status once reaped, -1/ETIMEDOUT otherwise. */
int sbx_iso_box_wait(struct sbx_iso_box *box, int timeout_ms);

/* Host facts the plan needs (merged /usr links, /etc files), probed once. */
void sbx_iso_host_layout(struct sbx_iso_plan *p);
/* Fills the plan for one sandbox (strings, limits) — parent side. */
void sbx_iso_plan_fill(struct sbx_iso_plan *p, const struct sbx_iso_limits *lim);
/* Runs the clone on the spawner thread; see spawn.c. */
int sbx_spawn_start(struct sbx_error *err);
/* ---- image roots (overlay.c), parent side ------------------------------ */

/* Builds the detached copy-on-write root of the child pid (maps written):
 * each layer an idmapped (the child's user namespace), read-only, nosuid,
 * nodev clone; an upper tmpfs sized by the plan; an overlay of both,
 * mounted nosuid,nodev.  Returns the overlay's mount fd (O_CLOEXEC) for
 * the child to move_mount() as its root, or -1 with err. */
int sbx_overlay_build(pid_t pid, const struct sbx_iso_plan *p, struct sbx_error *err);
/* The builder under it, also the gvisor driver's (whose gofer serves the
 * host's ids as they are: userns_fd -1, no idmapping).  Returns the
 * detached overlay's mount fd (nosuid,nodev; O_CLOEXEC) or -1. */
struct sbx_overlay_spec {
  const char *const *layers; /* absolute dirs, lowest first (1..SBX_ISO_MAX_LAYERS) */
  size_t nlayers;
  int userns_fd; /* idmap the layers into this user namespace; -1: no */
  uint64_t upper_size, upper_inodes;
  const char *source, *upper_source; /* mount source names (mountinfo) */
};
int sbx_overlay_mount(const struct sbx_overlay_spec *o, struct sbx_error *err);
/* How layers are passed to overlayfs: "lowerdir+", "lowerdir" (the list
 * form, for kernels before 6.7) or "auto" until the first mount learns it. */
const char *sbx_overlay_layer_form(void);
/* Forces the form: "append" (lowerdir+), "string" (one lowerdir= list);
 * NULL or anything else: auto (the overlay_layers setting). */
void sbx_overlay_set_form(const char *form);
/* image_layer_idmap: on (auto: idmapped layers, and shifted copies where
 * the kernel or filesystem refuses them) or off (always shifted copies). */
void sbx_overlay_set_layer_idmap(bool on);
/* Whether image sandboxes use shifted copies (forced, or learned). */
bool sbx_overlay_shifts_layers(void);
/* "idmapped", "shifted", or "auto" until the first image root learns it. */
const char *sbx_overlay_layer_idmap(void);
/* Makes the shifted copies of the layers for the range at base, when the
 * layers are shifted (before the spawner thread needs them). */
int sbx_overlay_prepare(const char *const *layers, size_t n, uid_t base, struct sbx_error *err);
/* The copy of layer (absolute) owned as the namespace mapping 0 to base
 * sees the original's owners (shift.c): built once, then reused; its
 * path, layer + "@<base>/tree", in out. */
int sbx_shift_layer(const char *layer, uid_t base, char *out, size_t len, struct sbx_error *err);

int sbx_spawn_clone(const struct sbx_iso_plan *plan, struct sbx_cgroup *cg, uid_t uid_base,
                    pid_t *pid_out, int *pidfd_out, int parent_sync_fd, struct sbx_error *err);

#endif
