/* pool.h — the container driver's warm pool.
 *
 * Per (profile, disk size) key, up to `size` sandboxes are kept fully
 * built — namespaces, netns, cgroup, mounts, sbx-init waiting after its
 * handshake — so creating a session is a hand-over.  A background thread
 * refills them.  A pooled sandbox is handed out once and never returns:
 * destroy() tears it down like any other.  A profile is pooled once it was
 * wanted (prewarm: its pool_size is not 0); its other disk sizes are learnt
 * from requests, the first create of one being cold.  A profile never
 * wanted is never pooled.  tmpfs sizes are fixed at mount time, hence disk
 * is part of the key; memory, pids and cpu are applied to the cgroup at
 * hand-over.
 *
 * Size: sbx_container_pool_configure() (the container driver passes the
 * container_pool_size setting), default 2; 0 disables pooling (and drops
 * idle entries). */
#ifndef SBX_ISOLATION_POOL_H
#define SBX_ISOLATION_POOL_H

#include <stdint.h>

#include "common/err.h"

struct sbx_iso_box;

/* Sets the per-key pool size (0 disables).  Thread-safe; any time. */
void sbx_container_pool_configure(unsigned size);
unsigned sbx_container_pool_size(void);

/* Builds one ready entry (box + sbx-init handshake) for a key's profile;
 * set by the driver. */
typedef int (*sbx_pool_build_fn)(const char *leaf, const char *profile, uint64_t disk_bytes,
                                 struct sbx_iso_box **out, struct sbx_error *err);

/* Starts the refill thread (idempotent). */
int sbx_pool_start(sbx_pool_build_fn build, struct sbx_error *err);
/* Hands over a ready box for (profile, disk) or NULL (then the caller
 * builds cold); the key is remembered and kept warm when the profile is
 * pooled. */
struct sbx_iso_box *sbx_pool_take(const char *profile, uint64_t disk_bytes);
/* Registers a key to keep warm from now on (prewarming at start), without
 * taking anything; kept across a stop and start (recovery). */
void sbx_pool_want(const char *profile, uint64_t disk_bytes);
/* Idle entries for a key (tests, metrics). */
unsigned sbx_pool_idle(const char *profile, uint64_t disk_bytes);
/* Stops the thread and destroys every idle entry. */
void sbx_pool_stop(void);

#endif
