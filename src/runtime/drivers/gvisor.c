/* gvisor.c — the gvisor driver table.  Not built in this version: probe
 * says why and create refuses, so a profile naming gvisor fails closed with
 * runtime_unavailable instead of running on a weaker tier (DESIGN §3). */
#include <stdio.h>

#include "runtime/driver.h"

#define NOT_BUILT "gvisor driver not built in this version (see issue 6)"

static int gvisor_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  snprintf(why, whylen, "%s", NOT_BUILT);
  return -1;
}

static int gvisor_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                         struct sbx_error *err)
{
  *out = NULL;
  return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "%s", NOT_BUILT);
}

/* Nothing can exist to destroy; free defensively if handed a sandbox. */
static void gvisor_destroy(struct sbx_sandbox *sb) { sbx_sandbox_free(sb); }

const struct sbx_driver sbx_drv_gvisor = {
    .abi = SBX_DRIVER_ABI,
    .name = "gvisor",
    .klass = "user-space-kernel",
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_TERMINAL | SBX_CAP_UPSTREAM |
            SBX_CAP_ARCHIVE | SBX_CAP_CONTEXTS,
    .probe = gvisor_probe,
    .create = gvisor_create,
    .destroy = gvisor_destroy,
};
