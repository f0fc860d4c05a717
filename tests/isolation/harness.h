/* harness.h — what every isolation test program shares: the container
 * driver set up under this run's own cgroup parent, sandboxes with the
 * static probe uploaded, running probe verbs through sbx-init exactly as
 * the daemon does, and host-side observers (/proc scans for markers and
 * namespaces, fd/RSS/cgroup counts) that decide whether anything leaked.
 *
 * Any driver that advertises SBX_CAP_EXEC|SBX_CAP_FILES can run the same
 * cases: set h_drv before h_setup().  Needs root.  Env: SBX_INIT_PATH,
 * SBX_PROBE_PATH. */
#ifndef SBX_TESTS_ISOLATION_HARNESS_H
#define SBX_TESTS_ISOLATION_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../unit/check.h"
#include "runtime/driver.h"
#include "runtime/sandbox.h"

extern const struct sbx_driver *h_drv;

/* Loads the probe, gives the driver cgroup_parent=sandboxd-test-<pid>, probes
 * the driver with the pool off.  Returns 0, 77 (skip: not root or no
 * paths) or 1 (broken).  h_finish() shuts the driver down, removes the
 * parent dirs and returns check_finish(name). */
int h_setup(void);
void h_teardown(void);
/* In the header: check.h's counters are per translation unit. */
static inline int h_finish(const char *name)
{
  h_teardown();
  return check_finish(name);
}

/* A sandbox of profile "test" (or the given one) with /work/probe uploaded. */
struct sbx_sandbox *h_make(struct sbx_limits lim);
struct sbx_sandbox *h_make_profile(const char *profile, struct sbx_limits lim);

/* Runs the probe with verbs (NULL-terminated); returns its stdout (caller
 * frees) or NULL when the exec could not run; res is always filled. */
char *h_run(struct sbx_sandbox *sb, const char *const *verbs, struct sbx_exec_result *res);
char *h_run_opts(struct sbx_sandbox *sb, const char *const *verbs, uint64_t timeout_ms,
                 struct sbx_cancel *cancel, struct sbx_exec_result *res);
/* An exec running on its own thread (a sandbox's background workload). */
struct h_bg {
  pthread_t thread;
  struct sbx_sandbox *sb;
  const char *verbs[32];
  uint64_t timeout_ms;
  struct sbx_cancel cancel;
  struct sbx_exec_result res;
  char *out;
};
/* Starts verbs (NULL-terminated, copied by pointer) on a thread. */
int h_bg_start(struct h_bg *bg, struct sbx_sandbox *sb, const char *const *verbs,
               uint64_t timeout_ms);
/* Waits until a host process with marker in its cmdline exists (ms max). */
bool h_marker_wait(const char *marker, int ms);
/* Cancels it (if still running) and joins; frees the result. */
void h_bg_stop(struct h_bg *bg);

/* Runs a shell command line in the sandbox; returns stdout (caller frees). */
char *h_sh(struct sbx_sandbox *sb, const char *cmd, struct sbx_exec_result *res);

/* The text after "<verb> " on the verb's line, e.g. "BLOCKED EPERM". */
const char *h_outcome(const char *out, const char *verb, char *buf, size_t len);

#define EXPECT(out, verb, want)                                                                 \
  do {                                                                                          \
    char b_[128];                                                                               \
    const char *got_ = h_outcome(out, verb, b_, sizeof b_);                                     \
    check_total++;                                                                              \
    if (strncmp(got_, want, strlen(want))) {                                                    \
      check_failed_count++;                                                                     \
      fprintf(stderr, "%s:%d: %s: got \"%s\", want \"%s\"\n", __FILE__, __LINE__, verb, got_,   \
              want);                                                                            \
    }                                                                                           \
  } while (0)

/* ---- host-side observers ------------------------------------------------ */

/* Host processes whose cmdline contains marker. */
int h_marker_count(const char *marker);
/* Waits up to ms for h_marker_count(marker) == 0; returns ms waited or -1. */
int h_marker_gone(const char *marker, int ms);
int h_fd_count(void);
long h_vmrss_kb(void);
/* Leaf dirs under this run's parent, summed over every hierarchy. */
int h_cg_dirs(void);
/* "net:[4026…]" of a host pid's namespace (buf), "" if gone. */
void h_ns_link(int pid, const char *ns, char *buf, size_t len);
/* How many processes (outside other sandboxd instances: a freed
 * namespace's inode number is soon reused) are in the namespace link (via
 * /proc/<pid>/ns/<ns>) or hold an fd to it. */
int h_ns_holders(const char *ns, const char *link);
/* Distinct network namespaces of this run's processes: this one, its
 * children and everything in its cgroups (the host's other processes
 * make and drop namespaces of their own at any moment). */
int h_netns_count(void);
/* Do any process's mountinfo lines mention this mount namespace's root
 * tmpfs?  (Mount namespaces are not named in mountinfo; the sandbox's
 * mounts are, by their "sbx-*" sources, in any namespace that still has
 * them.)  Counts processes outside other sandboxd instances. */
int h_sbx_mount_holders(void);

/* The probe's bytes, for tests that upload it elsewhere. */
extern char *h_probe_bytes;
extern size_t h_probe_len;
extern char h_parent[64];

#endif
