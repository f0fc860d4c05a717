/* driver.c — the registry of built-in drivers and the sbx_sandbox
 * allocation helpers every driver uses (runtime/driver.h). */
#include "runtime/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolation/iso.h" /* sbx_iso_set_resolv_conf */
#include "runtime/chan.h" /* sbx_fdin_discard */

static const struct sbx_driver *const all_drivers[] = {
#ifdef SBX_HAVE_CONTAINER
    &sbx_drv_container,
#endif
#ifdef SBX_HAVE_GVISOR
    &sbx_drv_gvisor,
#endif
    &sbx_drv_process,
    NULL,
};

const struct sbx_driver *const *sbx_drivers_all(void) { return all_drivers; }

const struct sbx_driver *sbx_driver_find(const char *name)
{
  for (const struct sbx_driver *const *d = all_drivers; name && *d; d++)
    if (!strcmp((*d)->name, name))
      return *d;
  return NULL;
}

const char *sbx_cap_name(uint32_t bit)
{
  switch (bit) {
  case SBX_CAP_EXEC: return "exec";
  case SBX_CAP_FILES: return "files";
  case SBX_CAP_TERMINAL: return "terminal";
  case SBX_CAP_WATCH: return "watch";
  case SBX_CAP_UPSTREAM: return "upstream";
  case SBX_CAP_ARCHIVE: return "archive";
  case SBX_CAP_CONTEXTS: return "contexts";
  case SBX_CAP_EGRESS: return "egress_allowlist";
  case SBX_CAP_IMAGES: return "images";
  default: return NULL;
  }
}

struct sbx_sandbox *sbx_sandbox_alloc(const struct sbx_driver *drv,
                                      const struct sbx_sandbox_spec *spec)
{
  struct sbx_sandbox *sb = calloc(1, sizeof *sb);
  if (!sb)
    return NULL;
  sb->driver = drv;
  sb->init_fd = -1;
  sb->init_pid = -1;
  if (spec) {
    if (spec->id)
      snprintf(sb->id, sizeof sb->id, "%s", spec->id);
    sb->limits = spec->limits;
  }
  pthread_mutex_init(&sb->chan_lock, NULL);
  pthread_mutex_init(&sb->pending_lock, NULL);
  return sb;
}

void sbx_sandbox_free(struct sbx_sandbox *sb)
{
  if (!sb)
    return;
  if (sb->init_fd >= 0)
    close(sb->init_fd);
  sbx_fdin_discard(sb);
  pthread_mutex_destroy(&sb->chan_lock);
  pthread_mutex_destroy(&sb->pending_lock);
  free(sb->spool_dir);
  free(sb);
}

void sbx_drivers_set_resolv_conf(const char *text)
{
  sbx_iso_set_resolv_conf(text);
}
