/* trace.c — W3C trace context, spans, the thread's current span, the park
 * table, and the sandbox-operation helpers.  Export is trace_export.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "obs/trace_int.h"

static __thread struct sbx_span *current;

/* ---- traceparent ---- */

static int hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f') /* W3C: lowercase only */
    return c - 'a' + 10;
  return -1;
}

static int unhex(const char *s, uint8_t *out, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return -1;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

static bool all_zero(const uint8_t *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return false;
  return true;
}

int sbx_traceparent_parse(const char *s, struct sbx_trace_ctx *out)
{
  struct sbx_trace_ctx c;
  /* Version 00 has exactly this shape; other versions (and "ff") are not
   * accepted: the header is then ignored and a new trace started. */
  if (!s || strlen(s) != SBX_TRACEPARENT_LEN || s[0] != '0' || s[1] != '0' || s[2] != '-' ||
      s[35] != '-' || s[52] != '-')
    return -1;
  if (unhex(s + 3, c.trace_id, 16) < 0 || unhex(s + 36, c.span_id, 8) < 0 ||
      unhex(s + 53, &c.flags, 1) < 0)
    return -1;
  if (all_zero(c.trace_id, 16) || all_zero(c.span_id, 8))
    return -1;
  *out = c;
  return 0;
}

void sbx_traceparent_format(const struct sbx_trace_ctx *c, char *out)
{
  char tid[33], sid[17];
  sbx_hex(c->trace_id, 16, tid);
  sbx_hex(c->span_id, 8, sid);
  snprintf(out, SBX_TRACEPARENT_LEN + 1, "00-%s-%s-%02x", tid, sid, c->flags & 0x01);
}

/* ---- spans ---- */

static uint64_t wall_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void random_nonzero(uint8_t *b, size_t n)
{
  do
    sbx_random_bytes(b, n);
  while (all_zero(b, n));
}

/* inherit: without an explicit parent, take the thread's current span. */
static struct sbx_span *span_new(const char *name, enum sbx_span_kind kind,
                                 const struct sbx_trace_ctx *parent, bool inherit)
{
  struct sbx_span *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  if (!parent && inherit && current)
    parent = &current->ctx;
  if (parent) {
    memcpy(s->ctx.trace_id, parent->trace_id, 16);
    memcpy(s->parent_id, parent->span_id, 8);
    s->ctx.flags = parent->flags & 0x01;
    s->has_parent = true;
  } else {
    random_nonzero(s->ctx.trace_id, 16);
    s->ctx.flags = 0x01; /* a root: sampled */
  }
  random_nonzero(s->ctx.span_id, 8);
  s->recording = (s->ctx.flags & 0x01) && sbx_trace_exporting();
  s->kind = kind;
  snprintf(s->name, sizeof s->name, "%s", name ? name : "span");
  s->start_ns = wall_ns();
  return s;
}

struct sbx_span *sbx_span_begin(const char *name, enum sbx_span_kind kind,
                                const struct sbx_trace_ctx *parent)
{
  return span_new(name, kind, parent, true);
}

void sbx_span_set_name(struct sbx_span *s, const char *name)
{
  if (s && name)
    snprintf(s->name, sizeof s->name, "%s", name);
}

/* A copy of at most max bytes (values may come from a caller's metadata). */
static char *dup_bounded(const char *v, size_t max)
{
  size_t n = strnlen(v, max);
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, v, n);
    d[n] = '\0';
  }
  return d;
}

static struct sbx_span_attr *attr_slot(struct sbx_span *s, const char *key)
{
  if (!s || !s->recording || !key)
    return NULL;
  for (int i = 0; i < s->nattrs; i++)
    if (strcmp(s->attrs[i].key, key) == 0) {
      free(s->attrs[i].s);
      s->attrs[i].s = NULL;
      return &s->attrs[i];
    }
  if (s->nattrs == SBX_SPAN_MAX_ATTRS)
    return NULL;
  struct sbx_span_attr *a = &s->attrs[s->nattrs++];
  a->key = key;
  return a;
}

void sbx_span_set_str(struct sbx_span *s, const char *key, const char *value)
{
  struct sbx_span_attr *a = value ? attr_slot(s, key) : NULL;
  if (!a)
    return;
  a->is_int = false;
  a->s = dup_bounded(value, 1024);
}

void sbx_span_set_int(struct sbx_span *s, const char *key, int64_t value)
{
  struct sbx_span_attr *a = attr_slot(s, key);
  if (!a)
    return;
  a->is_int = true;
  a->i = value;
}

void sbx_span_set_error(struct sbx_span *s, const char *message)
{
  if (!s || !s->recording)
    return;
  s->status_code = 2;
  free(s->status_msg);
  s->status_msg = message ? dup_bounded(message, 512) : NULL;
}

const struct sbx_trace_ctx *sbx_span_context(const struct sbx_span *s)
{
  return s ? &s->ctx : NULL;
}

void sbx_span_enter(struct sbx_span *s)
{
  if (!s || s->entered)
    return;
  s->prev = current;
  current = s;
  s->entered = true;
}

void sbx_span_leave(struct sbx_span *s)
{
  if (!s || !s->entered)
    return;
  if (current == s)
    current = s->prev;
  s->entered = false;
}

void sbx_span_free(struct sbx_span *s)
{
  if (!s)
    return;
  for (int i = 0; i < s->nattrs; i++)
    free(s->attrs[i].s);
  free(s->status_msg);
  free(s);
}

void sbx_span_end(struct sbx_span *s)
{
  if (!s)
    return;
  sbx_span_leave(s);
  s->end_ns = wall_ns();
  if (s->recording)
    sbx_trace_export_span(s);
  else
    sbx_span_free(s);
}

bool sbx_trace_current(struct sbx_trace_ctx *out)
{
  if (!current)
    return false;
  *out = current->ctx;
  return true;
}

bool sbx_trace_env_entry(char *buf, size_t len)
{
  char tp[SBX_TRACEPARENT_LEN + 1];
  buf[0] = '\0';
  if (!current)
    return false;
  sbx_traceparent_format(&current->ctx, tp);
  snprintf(buf, len, "TRACEPARENT=%s", tp);
  return true;
}

/* ---- the park table: direct-mapped, so it never grows ---- */

#define PARK_SLOTS 4096

struct park_entry {
  char key[64];
  char tenant[128];
  struct sbx_trace_ctx ctx;
};

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static struct park_entry park[PARK_SLOTS];

static size_t park_slot(const char *key)
{
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *p = key; *p; p++)
    h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return (size_t)(h % PARK_SLOTS);
}

void sbx_trace_park(const char *key, const char *tenant)
{
  struct sbx_trace_ctx c;
  if (!key || !sbx_trace_current(&c))
    return;
  pthread_mutex_lock(&park_lock);
  struct park_entry *e = &park[park_slot(key)];
  snprintf(e->key, sizeof e->key, "%s", key);
  snprintf(e->tenant, sizeof e->tenant, "%s", tenant ? tenant : "");
  e->ctx = c;
  pthread_mutex_unlock(&park_lock);
}

bool sbx_trace_unpark(const char *key, struct sbx_trace_ctx *ctx, char *tenant, size_t tlen)
{
  bool found = false;
  pthread_mutex_lock(&park_lock);
  struct park_entry *e = &park[park_slot(key)];
  if (e->key[0] && strcmp(e->key, key) == 0) {
    *ctx = e->ctx;
    snprintf(tenant, tlen, "%s", e->tenant);
    e->key[0] = '\0';
    found = true;
  }
  pthread_mutex_unlock(&park_lock);
  return found;
}

/* ---- sandbox operations ---- */

static void set_genai(struct sbx_span *s, json_t *md)
{
  const char *agent = json_string_value(json_object_get(md, "agent"));
  const char *tool = json_string_value(json_object_get(md, "tool"));
  if (!agent && !tool)
    return;
  sbx_span_set_str(s, "gen_ai.operation.name", "execute_tool");
  sbx_span_set_str(s, "gen_ai.agent.name", agent);
  sbx_span_set_str(s, "gen_ai.tool.name", tool);
}

static struct sbx_span *op_begin(const char *name, const struct sbx_trace_ctx *parent,
                                 const char *tenant, const char *profile, json_t *md, bool genai)
{
  struct sbx_span *s = sbx_span_begin(name, SBX_SPAN_INTERNAL, parent);
  sbx_span_set_str(s, "sandbox.tenant", tenant);
  sbx_span_set_str(s, "sandbox.profile", profile);
  if (genai && json_is_object(md))
    set_genai(s, md);
  sbx_span_enter(s);
  return s;
}

struct sbx_span *sbx_trace_op_begin(const char *name, const char *tenant, const char *profile,
                                    json_t *metadata, bool genai)
{
  return op_begin(name, NULL, tenant, profile, metadata, genai);
}

struct sbx_span *sbx_trace_op_begin_parked(const char *name, const char *key, int64_t tenant_id,
                                           const char *profile, const char *metadata_json)
{
  struct sbx_trace_ctx parent;
  char tenant[128];
  bool parked = key && sbx_trace_unpark(key, &parent, tenant, sizeof tenant);
  if (!parked)
    snprintf(tenant, sizeof tenant, "#%lld", (long long)tenant_id);
  json_t *md =
      metadata_json && sbx_trace_exporting() ? json_loads(metadata_json, 0, NULL) : NULL;
  /* A worker thread has no current span: without a parked context this is
   * the root of a new trace. */
  struct sbx_span *s = op_begin(name, parked ? &parent : NULL, tenant, profile, md, true);
  json_decref(md);
  return s;
}

void sbx_trace_op_end(struct sbx_span *s, const char *id_key, const char *id, const char *status,
                      const char *error)
{
  if (!s)
    return;
  if (id_key && id && id[0])
    sbx_span_set_str(s, id_key, id);
  sbx_span_set_str(s, "sandbox.status", status);
  if (error)
    sbx_span_set_error(s, error);
  sbx_span_end(s);
}

/* ---- the HTTP server span ---- */

struct sbx_span *sbx_trace_request_begin(const char *method, const char *traceparent)
{
  struct sbx_trace_ctx parent;
  bool has = sbx_traceparent_parse(traceparent, &parent) == 0;
  /* The header's parent or none: a request never adopts whatever span the
   * connection's thread may still hold. */
  struct sbx_span *s = span_new(method, SBX_SPAN_SERVER, has ? &parent : NULL, false);
  sbx_span_set_str(s, "http.request.method", method);
  return s;
}

void sbx_trace_request_route(struct sbx_span *s, const char *method, const char *route)
{
  char name[128];
  snprintf(name, sizeof name, "%s %s", method, route);
  sbx_span_set_name(s, name);
  sbx_span_set_str(s, "http.route", route);
}

void sbx_trace_request_end(struct sbx_span *s, int status)
{
  if (!s)
    return;
  sbx_span_set_int(s, "http.response.status_code", status);
  if (status >= 500 || status == 0) /* 0: nothing was sent */
    sbx_span_set_error(s, NULL);
  sbx_span_end(s);
}
