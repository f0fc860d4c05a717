/* cg_spawn.h — starting a helper program of a driver (runsc, QEMU, the
 * microVM link relay) inside a sandbox's cgroup, from a long-lived spawner
 * thread (common/spawner.h: PR_SET_PDEATHSIG follows the forking thread).
 *
 * The child waits on a pipe until the parent has moved it into the
 * cgroup, so it and everything it starts are charged to and killed with
 * that cgroup; it never runs outside it.  Between fork and exec the child
 * makes async-signal-safe calls only (the daemon is threaded). */
#ifndef SBX_RUNTIME_DRIVERS_CG_SPAWN_H
#define SBX_RUNTIME_DRIVERS_CG_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/err.h"
#include "common/spawner.h"
#include "isolation/iso.h"

#define SBX_CG_SPAWN_MAX_FDS 8

struct sbx_cg_spawn {
  char *const *argv; /* argv[0]: an absolute path */
  char *const *envp;
  const char *what; /* for errors: "gvisor", "microvm" */
  /* fds[i] becomes the child's fd i (0 ≤ i < nfds); every other fd is
   * closed before exec. */
  int fds[SBX_CG_SPAWN_MAX_FDS];
  int nfds;
  struct sbx_cgroup *cg;
  /* MAY be NULL: runs in the child after it joined the cgroup, before
   * exec; async-signal-safe; nonzero → the child exits 125, after writing
   * pre_exec_msg (if any) to its fd 2. */
  int (*pre_exec)(void);
  const char *pre_exec_msg;
  pid_t pid; /* out: the child (the caller reaps it) */
};

/* Starts r on spawner s.  0 with r->pid, or -1 with err. */
int sbx_cg_spawn(struct sbx_spawner *s, struct sbx_cg_spawn *r, struct sbx_error *err);

/* Waits up to timeout_ms for pid to exit and reaps it; SIGKILLs it first
 * when kill_first.  0 once reaped (or pid ≤ 0), -1 otherwise. */
int sbx_cg_spawn_reap(pid_t pid, unsigned timeout_ms, bool kill_first);

/* A network namespace holder (egress allowlists on drivers that link
 * their sandboxes before they start: gvisor, microvm): a forked child,
 * attached to cg, parked in a network namespace of its own (lo up) until
 * *fd_out is closed; returns once the netns exists.  The caller owns both:
 * sbx_cg_netns_release. */
int sbx_cg_netns_hold(struct sbx_cgroup *cg, pid_t *pid_out, int *fd_out, struct sbx_error *err);
/* Closes the holder's fd, reaps it (killing it if it lingers); zeroes both. */
void sbx_cg_netns_release(pid_t *pid, int *fd);

#endif
