/* driver.h — the runtime-driver seam (DESIGN §2–3).
 *
 * One driver per isolation class (process, container, gvisor, …), each a
 * `const struct sbx_driver` table of function pointers, in the way crun plugs
 * its handlers and curl its protocols.  The rest of the daemon never asks
 * which driver it holds: a driver's whole job is to build a sandbox whose
 * PID 1 is `sbx-init` connected to the daemon by a SOCK_SEQPACKET socket
 * (struct sbx_sandbox.init_fd), and to tear it down completely.  Exec and
 * file operations are then driver-independent messages to sbx-init
 * (runtime/sandbox.h), so exec in a live session is one message plus a
 * fork+exec inside namespaces that already exist.
 *
 * Ownership: create() returns a sandbox the caller owns; destroy() consumes
 * it (kills every process in it, removes its cgroup, mounts, state dir and
 * frees it).  Drivers are stateless tables; their per-host state (pools,
 * cgroup parent) lives in their own module statics set up by probe().
 *
 * Versioning (docs/architecture.md, "The driver seam"): a table carries the
 * ABI it was built for; sbx_driver_register() refuses one outside
 * [SBX_DRIVER_ABI_MIN, SBX_DRIVER_ABI] or with a MUST member NULL, and its
 * profiles are unavailable with that reason.  A MAY member is read through
 * sbx_driver_has(), which also checks that the table's ABI has it. */
#ifndef SBX_RUNTIME_DRIVER_H
#define SBX_RUNTIME_DRIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

/* ABI history (bump rule: docs/architecture.md):
 *  1  name … prewarm; describe, note, oom_kills were appended later
 *     without a bump, so an ABI 1 table may or may not have them.
 *  2  describe, note, oom_kills, pool_idle are members; env carries the
 *     daemon's driver settings (sbx_driver_setting); struct sbx_sandbox
 *     no longer carries the sandbox client's state (its layout changed,
 *     so ABI 1 tables are refused).
 *  3  memory appended (MAY). */
#define SBX_DRIVER_ABI 3
/* Oldest table ABI this daemon still runs. */
#define SBX_DRIVER_ABI_MIN 2

/* The ABI each MAY member first appeared in, for sbx_driver_has(). */
#define SBX_DRIVER_SINCE_usage 1
#define SBX_DRIVER_SINCE_recover 1
#define SBX_DRIVER_SINCE_shutdown 1
#define SBX_DRIVER_SINCE_prewarm 1
#define SBX_DRIVER_SINCE_describe 2
#define SBX_DRIVER_SINCE_note 2
#define SBX_DRIVER_SINCE_oom_kills 2
#define SBX_DRIVER_SINCE_pool_idle 2
#define SBX_DRIVER_SINCE_memory 3
/* Whether driver d provides MAY member m: its table is new enough to have
 * the member (an older one ends before it) and sets it. */
#define sbx_driver_has(d, m) ((d)->abi >= SBX_DRIVER_SINCE_##m && (d)->m != NULL)

/* Capability mask bits (DESIGN §3 "capabilities" column). */
enum {
  SBX_CAP_EXEC = 1u << 0,
  SBX_CAP_FILES = 1u << 1,
  SBX_CAP_TERMINAL = 1u << 2,
  SBX_CAP_WATCH = 1u << 3,
  SBX_CAP_UPSTREAM = 1u << 4,
  SBX_CAP_ARCHIVE = 1u << 5,
  SBX_CAP_CONTEXTS = 1u << 6,
  /* Its sandboxes have a network namespace of their own that the
   * net module can link to the host under an egress allowlist (a process
   * inside it is sb->init_pid; with SBX_CAP_EGRESS_AT_START, the pid given
   * to spec.net_prepare instead). */
  SBX_CAP_EGRESS = 1u << 7,
  /* It mounts an OCI image's layers (spec.layers) as the root. */
  SBX_CAP_IMAGES = 1u << 8,
  /* Internal (not listed by the API): its sandboxes take their network
   * link when they start, never later (gvisor: runsc copies the netns's
   * interfaces at start).  The core then links them through
   * spec.net_prepare during create() and refuses none→allowlist on a live
   * one (409). */
  SBX_CAP_EGRESS_AT_START = 1u << 9,
};

/* Resource limits of one sandbox.  0 means "no limit from the request"
 * (the profile's ceiling still applies; see core/profile.c). */
struct sbx_limits {
  uint64_t cpu_millis;   /* CPU quota in millicores */
  uint64_t memory_bytes; /* memory ceiling (no swap beyond it) */
  uint64_t disk_bytes;   /* size of writable /tmp + /work */
  uint64_t pids;         /* max tasks */
  uint64_t timeout_s;    /* default per-exec wall-clock timeout */
  uint64_t output_bytes; /* per stream capture cap */
};

/* What the daemon knows about this host, handed to probe(). */
struct sbx_driver_env {
  const char *state_dir;       /* daemon state dir (absolute) */
  const char *init_path;       /* absolute path of the sbx-init binary */
  const char *runsc_path;      /* gvisor: runsc binary (may be NULL) */
  bool unsafe_process_enabled; /* --enable-unsafe-process-driver */
  /* Probes run in the background while the daemon serves (core/profile.h).
   * A probe that starts a program bounds it by probe_timeout_ms (0: the
   * driver's default) and kills its whole tree when it is late, or as soon
   * as *cancel turns true (the daemon is stopping; may be NULL). */
  unsigned probe_timeout_ms;
  const atomic_bool *cancel;
  /* gvisor: the KVM platform's probe, which hangs on some hosts (nested
   * virtualisation), gets this much (0: the driver's default); kvm_off:
   * behave as if /dev/kvm were absent (--gvisor-kvm=off). */
  unsigned kvm_probe_timeout_ms;
  bool kvm_off;
  /* The daemon's driver settings (config file `[driver]`, SANDBOXD_*;
   * docs/configuration.md), read with sbx_driver_setting(): a driver never
   * reads the environment, so what the operator configured is what it
   * sees, and a test or a second daemon in one process can differ. */
  const struct sbx_driver_setting *settings;
  size_t nsettings;
};

/* One driver setting: "gvisor_platform" = "ptrace". */
struct sbx_driver_setting {
  const char *key;
  const char *value;
};

/* The value of setting key, or NULL when it is not set (or env is NULL). */
const char *sbx_driver_setting(const struct sbx_driver_env *env, const char *key);
/* Setting key as a whole number clamped to max; def when unset or not a
 * number (logged). */
unsigned sbx_driver_setting_uint(const struct sbx_driver_env *env, const char *key, unsigned def,
                                 unsigned max);

/* Request to build one sandbox. */
struct sbx_sandbox_spec {
  const char *id;      /* session or execution id: unique, [a-z0-9_] */
  const char *profile; /* profile name, for logs and pools */
  const char *image;   /* image reference; "host" for the host pack */
  struct sbx_limits limits;
  /* An OCI image's unpacked layers (absolute dirs, lowest first,
   * nlayers > 0) to mount read-only under a copy-on-write upper sized by
   * limits.disk; image_digest (its manifest digest) keys warm pools.  Both
   * NULL/0 for the host pack.  The core holds the image while the sandbox
   * lives, so the dirs stay. */
  const char *const *layers;
  size_t nlayers;
  const char *image_digest;
  /* The image's User, inside the sandbox's own id range (1 to
   * 65535); 0: the sandbox user (1000).  Never root: an image asking for
   * root runs as the sandbox user (docs/images.md). */
  uint32_t run_uid, run_gid;
  /* Egress allowlists on SBX_CAP_EGRESS_AT_START drivers; all NULL
   * otherwise (and for egress none).  Such a driver builds the sandbox's
   * network namespace first, calls net_prepare(net_ctx, pid of a process in
   * it) before it starts anything there (the core links it to the host:
   * sbx_net_attach), and gives the sandbox net_resolv_conf as its
   * /etc/resolv.conf.  A net_prepare failure fails create().  Other
   * drivers ignore these: the core links their sandboxes after create(). */
  int (*net_prepare)(void *net_ctx, pid_t netns_pid, struct sbx_error *err);
  void *net_ctx;
  const char *net_resolv_conf;
};

/* Resource counters of a sandbox as a whole (cgroup), if the driver has them. */
struct sbx_usage {
  double cpu_seconds;         /* user+system */
  uint64_t memory_peak_bytes; /* high-water mark */
  uint64_t oom_kills;         /* times the kernel's OOM killer fired in it */
  uint64_t pids_current;
  uint64_t pids_max_hits; /* times a fork failed at the pids ceiling (pids.events max) */
};

/* Memory the sandbox holds now, as the host charges it (driver's memory()). */
struct sbx_memory {
  uint64_t current_bytes; /* everything charged: anonymous, kernel, page cache, tmpfs */
  uint64_t file_bytes;    /* of which page cache and tmpfs files */
};

struct sbx_driver;
struct sbx_sandbox_client;

/* A live sandbox.  Common to every driver; driver data hangs off priv.
 * What the sandbox client keeps about it (channel lock, pending fd-in
 * writes) is behind `client`, opaque outside runtime/. */
struct sbx_sandbox {
  const struct sbx_driver *driver;
  char id[96];
  int init_fd;    /* SOCK_SEQPACKET to sbx-init; owned */
  pid_t init_pid; /* host pid of the sandbox's outermost process */
  struct sbx_limits limits;
  char root_desc[64]; /* for logs: "/" or the host dir that is its root */
  void *priv;         /* driver-owned */
  /* "" when the workload sees the same paths as file operations (a real
   * root of its own); otherwise the host directory that file operations
   * call "/" while the workload sees host paths (the process driver). */
  char host_root[4096];
  /* No fd can leave this sandbox (its READY said FDIN: gVisor's host
   * sockets refuse SCM_RIGHTS), so the sandbox client uses the fd-in forms
   * of init/proto.h (files are copied through sbx-init, terminals and
   * ports relayed by it).  Set by the driver from sbx_init_handshake_ex();
   * false: fds come out. */
  bool fd_in;
  /* fd-in: where the client keeps a file opened for writing until its
   * caller is done with it (a directory on tmpfs or disk; NULL:
   * /dev/shm, else /tmp).  malloc'd; freed by sbx_sandbox_free. */
  char *spool_dir;
  struct sbx_sandbox_client *client; /* made by sbx_sandbox_alloc; runtime/chan.h */
};

/* A driver.  Every member is documented MUST (non-NULL, checked by
 * sbx_driver_register) or MAY (NULL ok; read through sbx_driver_has).
 * New members go at the end only, with an ABI bump (driver.h's history). */
struct sbx_driver {
  unsigned abi;      /* MUST be SBX_DRIVER_ABI (what the table was built for) */
  const char *name;  /* MUST: "process", "container", "gvisor", … */
  const char *klass; /* MUST: "none", "shared-kernel", "user-space-kernel", … */
  uint32_t caps;     /* MUST: SBX_CAP_* this driver provides */

  /* MUST.  Is this driver usable on this host?  0 if yes; otherwise -1 and a
   * one-line reason in `why` (shown by GET /v1/sandbox/profiles and in the
   * 503 runtime_unavailable error).  Called once at start, from a thread
   * of its own while the daemon already serves (so it must be bounded in
   * time: env->probe_timeout_ms, env->cancel); may set up module state
   * (cgroup parent, pools).  Must not run untrusted code. */
  int (*probe)(const struct sbx_driver_env *env, char *why, size_t whylen);

  /* MUST.  Build a sandbox with sbx-init running and connected.  On failure
   * nothing of it is left behind (fail closed: never a weaker sandbox). */
  int (*create)(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                struct sbx_error *err);

  /* MUST.  Kill every process in the sandbox at once, remove everything it
   * owned on the host, free it.  Never fails from the caller's view; logs. */
  void (*destroy)(struct sbx_sandbox *sb);

  /* MAY.  Whole-sandbox counters (cgroup).  NULL: only per-exec rusage. */
  int (*usage)(struct sbx_sandbox *sb, struct sbx_usage *out);

  /* MAY.  At daemon start: remove sandboxes a previous run left behind
   * (processes, cgroups, mounts, state dirs).  Returns how many. */
  int (*recover)(const struct sbx_driver_env *env);

  /* MAY.  Stop background work (pools) before exit. */
  void (*shutdown)(void);

  /* MAY.  Start keeping sandboxes of this profile and limits warm (called
   * at start for each available profile whose pool_size > 0), so even the
   * first create is a hand-over. */
  void (*prewarm)(const char *profile, const struct sbx_limits *limits);

  /* MAY (ABI 2).  A short note on how this host runs the driver (gvisor: its platform,
   * "ptrace"/"systrap"/"kvm"), shown as "platform" by GET
   * /v1/sandbox/profiles; NULL or "" when there is nothing to say. */
  const char *(*describe)(void);

  /* MAY (ABI 2).  Why the driver runs as
   * describe() says when that is not its first choice (gvisor: "kvm probe
   * timed out after 2 s"), shown as "platform_note"; NULL or "" when
   * there is nothing to say.  Read only after probe() returned. */
  const char *(*note)(void);

  /* MAY (ABI 2).  The sandbox cgroup's
   * OOM-kill counter alone, in one small read: the exec path reads it
   * before and after every exec to decide oom_killed whatever the process
   * tree did (runtime/sandbox.c).  NULL: usage() is read instead, or
   * nothing without it. */
  int (*oom_kills)(struct sbx_sandbox *sb, uint64_t *out);

  /* MAY (ABI 2).  Warm sandboxes ready to hand over for this profile, as
   * prewarm(profile, limits) asked for (the `sandbox_pool_idle` gauge;
   * called at scrape time from any thread, so cheap and locked).  NULL:
   * the driver keeps no pool (the gauge is not reported for it). */
  unsigned (*pool_idle)(const char *profile, const struct sbx_limits *limits);

  /* MAY (ABI 3).  The sandbox's memory now (cgroup), read on request (a
   * metrics sample), never on the exec path.  NULL: not measured. */
  int (*memory)(struct sbx_sandbox *sb, struct sbx_memory *out);
};

/* The built-in drivers (runtime/drivers/). */
extern const struct sbx_driver sbx_drv_process;
extern const struct sbx_driver sbx_drv_container;
extern const struct sbx_driver sbx_drv_gvisor;
extern const struct sbx_driver sbx_drv_microvm;
extern const struct sbx_driver sbx_drv_wasm;

/* Registry: the built-in drivers are registered on first use; another
 * (microvm, wasm, a test's) is added with sbx_driver_register before the
 * core starts.  A table is refused when its abi is not one this daemon
 * runs or a MUST member is NULL: -1, the reason in err (naming the driver
 * and the member) and in the log, and sbx_driver_refusal(name) keeps it
 * so that the driver's profiles are unavailable with it.  A second table
 * of a registered name is refused too.  Not thread-safe against lookups:
 * register at start. */
int sbx_driver_register(const struct sbx_driver *drv, struct sbx_error *err);
/* Why the driver called name was refused, or NULL. */
const char *sbx_driver_refusal(const char *name);
/* Every registered driver, NULL-terminated. */
const struct sbx_driver *const *sbx_drivers_all(void);
/* A registered driver by name, or NULL (unknown or refused). */
const struct sbx_driver *sbx_driver_find(const char *name);
/* Names of capability bits, for JSON ("exec", "files", …). */
const char *sbx_cap_name(uint32_t bit);
/* The /etc/resolv.conf of every sandbox built from now on by a driver that
 * writes the sandbox's /etc itself (container: isolation/mount.c); set once
 * at start by core when the net module runs.  A driver that is handed the
 * text per sandbox (spec.net_resolv_conf) ignores it. */
void sbx_drivers_set_resolv_conf(const char *text);

/* Helpers for drivers. */
/* Allocates a zeroed sandbox with init_fd = -1 and its client state. */
struct sbx_sandbox *sbx_sandbox_alloc(const struct sbx_driver *drv,
                                      const struct sbx_sandbox_spec *spec);
/* Closes init_fd and frees what sbx_sandbox_alloc made (spool_dir, the
 * client state; not priv) — the memory once no exec running on another
 * thread still holds it (that exec then ends finding the channel gone). */
void sbx_sandbox_free(struct sbx_sandbox *sb);

#endif
