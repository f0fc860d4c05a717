/* sandbox_up.c — bringing one sandbox up and down for core: the request
 * fields every sandbox-building call shares (profile, image, limits,
 * network, metadata), parsed once, and the one build sequence (image →
 * spec → net prepare → create → net attach) with its single teardown.
 * A session keeps what this builds until it ends; an execution until its
 * command is done.  Anything half-built is torn down here, in reverse, so
 * no caller has a cleanup path of its own. */
#include <string.h>

#include "common/util.h"
#include "core/internal.h"
#include "image/image.h"
#include "net/net.h"

int sbx_core_sandbox_parse(struct sbx_core *core, json_t *body, struct sbx_sandbox_req *rq,
                           struct sbx_error *err)
{
  memset(rq, 0, sizeof *rq);
  json_t *v = json_object_get(body, "profile");
  if (v && !json_is_null(v) && !json_is_string(v))
    return sbx_err_field(err, "profile", "profile must be a string");
  if (!(rq->profile = sbx_profile_find(&core->profiles, v ? json_string_value(v) : NULL, err)))
    return -1;
  if (sbx_core_image_check(rq->profile, json_object_get(body, "image"), rq->image, err) < 0 ||
      sbx_schema_limits(json_object_get(body, "limits"), rq->profile, &rq->limits, err) < 0 ||
      sbx_schema_network(json_object_get(body, "network"), "network", &rq->policy, err) < 0)
    return -1;
  rq->metadata = json_object_get(body, "metadata");
  if (sbx_schema_metadata(rq->metadata, "metadata", err) < 0) {
    sbx_core_sandbox_req_free(rq);
    return -1;
  }
  return 0;
}

void sbx_core_sandbox_req_free(struct sbx_sandbox_req *rq)
{
  sbx_net_policy_free(rq->policy);
  rq->policy = NULL;
}

/* The image first (a first use may pull it), then what it says about the
 * command (execution) and the sandbox's layers and user. */
static int image_stage(struct sbx_core *core, const struct sbx_sandbox_req *rq,
                       struct sbx_exec_spec *exec, bool default_command,
                       struct sbx_sandbox_spec *spec, struct sbx_core_box *box,
                       enum sbx_box_stage *failed, struct sbx_error *err)
{
  *failed = SBX_BOX_IMAGE;
  if (sbx_core_image_acquire(core, rq->image, &box->image, err) < 0)
    return -1;
  *failed = SBX_BOX_REQUEST;
  if (exec && sbx_core_image_exec(box->image, exec, default_command, err) < 0)
    return -1;
  return sbx_core_image_spec(box->image, spec, err);
}

int sbx_core_sandbox_up(struct sbx_core *core, const struct sbx_box_want *want,
                        struct sbx_core_box *box, enum sbx_box_stage *failed,
                        struct sbx_error *err)
{
  const struct sbx_sandbox_req *rq = want->rq;
  memset(box, 0, sizeof *box);
  struct sbx_sandbox_spec spec = {.id = want->id,
                                  .profile = rq->profile->name,
                                  .image = rq->profile->image,
                                  .limits = rq->limits};
  struct sbx_core_net_prep prep = {0};
  int rc = -1;
  if (image_stage(core, rq, want->exec, want->default_command, &spec, box, failed, err) < 0)
    goto out;
  /* gvisor: linked inside create(), before runsc starts (network.c) */
  sbx_core_net_prepare(&prep, rq->profile, want->id, want->tenant_id, rq->policy, &spec);
  *failed = SBX_BOX_CREATE;
  if (rq->profile->driver->create(&spec, &box->sb, err) < 0)
    goto out;
  *failed = SBX_BOX_ATTACH; /* never run a sandbox unlinked: down below destroys it */
  if (sbx_core_net_attach(want->id, want->tenant_id, box->sb, rq->policy, &prep, &box->net,
                          err) < 0)
    goto out;
  *failed = SBX_BOX_NONE;
  rc = 0;
out:
  sbx_core_net_prep_drop(&prep); /* a link whose sandbox never came up */
  if (rc < 0)
    sbx_core_sandbox_down(box);
  return rc;
}

void sbx_core_sandbox_down(struct sbx_core_box *box)
{
  if (box->net) /* unlink first: no packet of a dying sandbox is ever admitted */
    sbx_net_detach(box->net);
  if (box->sb)
    box->sb->driver->destroy(box->sb);
  if (box->image) /* after the sandbox: its layers were mounted until now */
    sbx_image_release(box->image);
  memset(box, 0, sizeof *box);
}
