/* fault.h — the daemon's table of injectable failures, after SQLite's
 * syscall table: named points at the real sites (clone, mount, cgroup
 * writes, the nft transaction, store writes, allocation) that a test can
 * make fail on the Nth call, from the Nth call on, or on every call, with
 * a chosen errno.  Each site is one line:
 *
 *   if (sbx_fault(SBX_FAULT_MOUNT)) return -1;   // errno is set
 *
 * How it is armed, and why that is no attack surface: only from the
 * environment variable SANDBOXD_FAULTS, read once by `sandboxd serve` at
 * start, before any thread, and then removed from the environment (no
 * child inherits it).  The daemon's environment belongs to whoever starts
 * it (root, the service manager): a party that can already do anything
 * to the daemon.  Nothing later can arm, re-arm or read the table — no
 * API route, no config-file key, nothing a tenant or a sandbox reaches;
 * sbx-init (inside the sandbox) does not link this file.  An armed daemon
 * says so at warn level in its log.  A build with -Dfault_injection=false
 * compiles every site away and refuses to start when SANDBOXD_FAULTS is
 * set (a test setting that reached a production host is a mistake to
 * stop at, not to ignore).
 *
 * Spec: comma-separated POINT:WHEN[:ERRNO], WHEN = N (the Nth call only),
 * N+ (the Nth and every later one) or * (every call); ERRNO a name (EIO,
 * ENOMEM, …) or a number, default EIO (ENOMEM for alloc).  Counts are per
 * point from daemon start, shared with the children cloned for a sandbox
 * (until they exec sbx-init), so "mount:3" fails the 3rd mount of all,
 * once.
 *
 * sbx_fault() is async-signal-safe (atomics, write(2) only): the mount
 * and unshare points run in a child just cloned from a threaded daemon.
 * A fired fault writes one line "sandboxd: fault injected: POINT #N
 * (ERRNO)" to fd 2 so a test can tell a path that reached the point from
 * one that did not. */
#ifndef SBX_COMMON_FAULT_H
#define SBX_COMMON_FAULT_H

#include <stdbool.h>

#include "common/err.h"

enum sbx_fault_point {
  SBX_FAULT_CLONE,        /* clone3 of a sandbox (isolation/spawn.c) */
  SBX_FAULT_UNSHARE,      /* the child's unshare (isolation/chain.c) */
  SBX_FAULT_MOUNT,        /* a mount in the child (isolation/mount.c) */
  SBX_FAULT_CGROUP_WRITE, /* a cgroup control-file write (isolation/cgroup.c) */
  SBX_FAULT_NFT,          /* an nft transaction (net/nft.c) */
  SBX_FAULT_STORE_WRITE,  /* a statement that writes (store/sqlite, store/postgres) */
  SBX_FAULT_ALLOC,        /* an allocation by jansson (every JSON document) */
  SBX_FAULT__COUNT
};

#ifdef SBX_FAULT_INJECTION
/* true (errno set) when this call of point p is to fail. */
bool sbx_fault(enum sbx_fault_point p);
#else
static inline bool sbx_fault(enum sbx_fault_point p)
{
  (void)p;
  return false;
}
#endif

/* Parses spec into the table (once, before threads).  Fails on a bad
 * spec, or when the build has no fault injection. */
int sbx_fault_arm(const char *spec, struct sbx_error *err);
/* Arms from SANDBOXD_FAULTS when set, then unsets it. */
int sbx_fault_arm_from_env(struct sbx_error *err);

#endif
