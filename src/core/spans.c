/* spans.c — the core's side of tracing (obs/trace.h): naming a span needs
 * core state that obs/ may not reach, here the session's metadata (its
 * agent/tool keys) for an exec span. */
#include <jansson.h>

#include "core/internal.h"

struct sbx_span *sbx_exec_span_begin(struct sbx_core *core, const struct sbx_principal *who,
                                     const struct sbx_live_session *ls)
{
  json_t *md = NULL;
  /* One indexed read, only while spans are exported: the exec request
   * carries no metadata, the session it runs in does (and PATCH may have
   * changed it since create). */
  if (sbx_trace_exporting()) {
    struct sbx_session_row row = {0};
    if (core->store.ops->session_get(core->store.st, who->tenant_id, ls->id, &row, NULL) == 0) {
      md = row.metadata_json ? json_loads(row.metadata_json, 0, NULL) : NULL;
      sbx_session_row_free(&row);
    }
  }
  struct sbx_span *s = sbx_trace_op_begin("sandbox.exec", who->tenant, ls->profile->name, md,
                                          true);
  sbx_span_set_str(s, "sandbox.session.id", ls->id);
  json_decref(md);
  return s;
}
