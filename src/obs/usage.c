/* usage.c — building, storing and summing usage records, and the FinOps
 * payload.  See usage.h. */
#include "obs/usage.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* ---- tenant names ---- */

#define NAMES 1024

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int64_t id;
  char name[128];
} names[NAMES];

void sbx_usage_remember_tenant(int64_t tenant_id, const char *name)
{
  if (tenant_id <= 0 || !name || !*name)
    return;
  pthread_mutex_lock(&names_lock);
  size_t slot = (size_t)tenant_id % NAMES; /* a collision just costs a name */
  names[slot].id = tenant_id;
  snprintf(names[slot].name, sizeof names[slot].name, "%s", name);
  pthread_mutex_unlock(&names_lock);
}

static void tenant_name(int64_t tenant_id, char *out, size_t len)
{
  pthread_mutex_lock(&names_lock);
  size_t slot = (size_t)tenant_id % NAMES;
  snprintf(out, len, "%s", names[slot].id == tenant_id ? names[slot].name : "");
  pthread_mutex_unlock(&names_lock);
}

/* ---- recording ---- */

/* A metadata value as text: strings as they are, numbers and booleans
 * printed, anything else ignored. */
static void meta_copy(json_t *md, const char *key, char *out, size_t len)
{
  json_t *v = json_object_get(md, key);
  if (json_is_string(v))
    snprintf(out, len, "%s", json_string_value(v));
  else if (json_is_integer(v))
    snprintf(out, len, "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v))
    snprintf(out, len, "%g", json_real_value(v));
  else if (json_is_boolean(v))
    snprintf(out, len, "%s", json_is_true(v) ? "true" : "false");
}

void sbx_usage_row_of(const struct sbx_usage_input *in, struct sbx_usage_row *out)
{
  struct sbx_usage_row row = {.tenant_id = in->tenant_id};
  sbx_random_id("use", row.id, sizeof row.id);
  if (in->tenant && *in->tenant)
    snprintf(row.tenant, sizeof row.tenant, "%s", in->tenant);
  else
    tenant_name(in->tenant_id, row.tenant, sizeof row.tenant);
  snprintf(row.kind, sizeof row.kind, "%s", in->kind ? in->kind : "");
  snprintf(row.source_id, sizeof row.source_id, "%s", in->source_id ? in->source_id : "");
  snprintf(row.profile, sizeof row.profile, "%s", in->profile ? in->profile : "");
  snprintf(row.status, sizeof row.status, "%s", in->status ? in->status : "");
  json_t *md = in->metadata_json ? json_loads(in->metadata_json, 0, NULL) : NULL;
  meta_copy(md, "project", row.project, sizeof row.project);
  meta_copy(md, "agent", row.agent, sizeof row.agent);
  meta_copy(md, "run", row.run, sizeof row.run);
  json_decref(md);
  row.cpu_seconds = in->cpu_seconds;
  row.memory_mb_seconds = in->memory_mb_seconds;
  row.duration_seconds = in->duration_seconds;
  row.created_at = sbx_wall_s();
  snprintf(row.delivery, sizeof row.delivery, "%s",
           sbx_outbox_configured() ? "pending" : "none");
  *out = row;
}

void sbx_usage_stored(const struct sbx_usage_row *row)
{
  if (!strcmp(row->delivery, "pending"))
    sbx_outbox_kick();
}

int sbx_usage_record(struct sbx_store_handle *st, const struct sbx_usage_input *in,
                     struct sbx_usage_row *out, struct sbx_error *err)
{
  struct sbx_usage_row row;
  sbx_usage_row_of(in, &row);
  if (st->ops->usage_insert(st->st, &row, err) < 0)
    return -1;
  sbx_usage_stored(&row);
  if (out)
    *out = row;
  return 0;
}

static json_t *time_json(int64_t t)
{
  char buf[40];
  sbx_format_time(t, buf, sizeof buf);
  return json_string(buf);
}

json_t *sbx_usage_payload(const struct sbx_usage_row *row)
{
  json_t *md = json_object();
  if (row->project[0])
    json_object_set_new(md, "project", json_string(row->project));
  if (row->agent[0])
    json_object_set_new(md, "agent", json_string(row->agent));
  if (row->run[0])
    json_object_set_new(md, "run", json_string(row->run));
  return json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:o, s:o}", "id", row->id,
                   "tenant_id", (json_int_t)row->tenant_id, "tenant", row->tenant, "kind",
                   row->kind, "source_id", row->source_id, "profile", row->profile, "status",
                   row->status, "cpu_seconds", row->cpu_seconds, "memory_mb_seconds",
                   row->memory_mb_seconds, "duration_seconds", row->duration_seconds, "metadata",
                   md, "created_at", time_json(row->created_at));
}

/* ---- the report ---- */

struct report {
  json_t *groups;
  struct sbx_usage_group total;
};

static int group_cb(void *ctx, const struct sbx_usage_group *g)
{
  struct report *r = ctx;
  json_array_append_new(r->groups,
                        json_pack("{s:o, s:I, s:f, s:f, s:f}", "key",
                                  g->key[0] ? json_string(g->key) : json_null(), "records",
                                  (json_int_t)g->records, "cpu_seconds", g->cpu_seconds,
                                  "memory_mb_seconds", g->memory_mb_seconds, "duration_seconds",
                                  g->duration_seconds));
  r->total.records += g->records;
  r->total.cpu_seconds += g->cpu_seconds;
  r->total.memory_mb_seconds += g->memory_mb_seconds;
  r->total.duration_seconds += g->duration_seconds;
  return 0;
}

int sbx_usage_report(struct sbx_store_handle *st, int64_t tenant_id, const char *group_by,
                     int64_t from, int64_t to, json_t **out, struct sbx_error *err)
{
  if (!group_by || (strcmp(group_by, "profile") && strcmp(group_by, "project") &&
                    strcmp(group_by, "agent"))) {
    sbx_err_field(err, "group_by", "group_by must be profile, project or agent");
    return sbx_err_fr(err, "group_by doit valoir profile, project ou agent");
  }
  struct report r = {.groups = json_array()};
  if (st->ops->usage_query(st->st, tenant_id, group_by, from, to, group_cb, &r, err) < 0) {
    json_decref(r.groups);
    return -1;
  }
  *out = json_pack("{s:s, s:o, s:o, s:o, s:{s:I, s:f, s:f, s:f}}", "group_by", group_by, "from",
                   time_json(from), "to", to > 0 ? time_json(to) : json_null(), "groups",
                   r.groups, "total", "records", (json_int_t)r.total.records, "cpu_seconds",
                   r.total.cpu_seconds, "memory_mb_seconds", r.total.memory_mb_seconds,
                   "duration_seconds", r.total.duration_seconds);
  return 0;
}

/* ---- times ---- */

static int parse_offset(const char *p, long *off)
{
  if (*p == 'Z' || *p == 'z') {
    *off = 0;
    return p[1] ? -1 : 0;
  }
  int hh, mm, used = 0;
  if ((*p != '+' && *p != '-') || sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &used) != 2 ||
      used != 5 || p[6] || hh > 23 || mm > 59)
    return -1;
  *off = (*p == '-' ? -1 : 1) * (hh * 3600L + mm * 60L);
  return 0;
}

int sbx_usage_parse_time(const char *s, int64_t *out)
{
  if (!s || !*s)
    return -1;
  char *end;
  long long n = strtoll(s, &end, 10);
  if (!*end && isdigit((unsigned char)s[0])) {
    *out = n;
    return 0;
  }
  struct tm tm = {0};
  const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!p)
    return -1;
  if (*p == '.') /* fractional seconds: the range is in whole seconds */
    for (p++; isdigit((unsigned char)*p); p++)
      ;
  long off;
  if (parse_offset(p, &off) < 0)
    return -1;
  *out = (int64_t)timegm(&tm) - off;
  return 0;
}
