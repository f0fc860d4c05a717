/* spans.c — the core's side of tracing (obs/trace.h): naming a span needs
 * core state that obs/ may not reach, here the session's metadata (its
 * agent/tool keys) for an exec span. */
#include <jansson.h>
#include <stdlib.h>

#include "core/internal.h"

struct sbx_span *sbx_exec_span_begin(struct sbx_core *core, const struct sbx_principal *who,
                                     struct sbx_live_session *ls)
{
  (void)core;
  json_t *md = NULL;
  /* Only while spans are exported: the exec request carries no metadata,
   * the session it runs in does (as PATCH last stored it). */
  if (sbx_trace_exporting()) {
    char *txt = sbx_session_metadata(ls);
    md = txt ? json_loads(txt, 0, NULL) : NULL;
    free(txt);
  }
  struct sbx_span *s =
      sbx_trace_op_begin("sandbox.exec", who->tenant, ls->profile->name, md, true);
  sbx_span_set_str(s, "sandbox.session.id", ls->id);
  json_decref(md);
  return s;
}
