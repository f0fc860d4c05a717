/* execution.c — one-shot asynchronous executions: validated and
 * stored as queued, run by a bounded pool of workers in a fresh sandbox
 * each (never reused), input files written before start, `collect` globs
 * copied out with size and sha256 and stored in the same transaction that
 * makes the status final.  Cancel reaches a queued one through the store
 * (finish is conditional) and a running one through its cancel token. */
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "core/fleet.h"
#include "core/internal.h"
#include "core/resources.h"
#include "image/image.h"
#include "net/net.h"
#include "obs/metrics.h"

#define MAX_COLLECT_FILES 256
#define MAX_COLLECT_FILE_BYTES (16u << 20)
#define MAX_COLLECT_TOTAL_BYTES (64u << 20)

static const char *const exec_fields[] = {"profile", "image",    "command", "language", "code",
                                          "files",   "collect",  "stdin",   "env",      "limits",
                                          "network", "metadata", NULL};

/* The parsed request: what create validates and what a worker runs. */
struct exec_plan {
  struct sbx_sandbox_req rq; /* profile, image, limits, network, metadata */
  struct sbx_exec_spec spec;
  json_t *files;        /* borrowed from the body */
  json_t *collect;      /* borrowed */
  bool default_command; /* no command: the image's Entrypoint+Cmd */
};

static void plan_free(struct exec_plan *p)
{
  sbx_exec_spec_free(&p->spec);
  sbx_core_sandbox_req_free(&p->rq);
}

static int parse_files(json_t *files, struct sbx_error *err)
{
  if (!files || json_is_null(files))
    return 0;
  if (!json_is_array(files) || json_array_size(files) > 1024)
    return sbx_err_field(err, "files", "files must be an array of at most 1024 objects");
  size_t i;
  json_t *f;
  json_array_foreach(files, i, f)
  {
    char field[48];
    snprintf(field, sizeof field, "files[%zu]", i);
    static const char *const allowed[] = {"path", "content", "encoding", "mode", NULL};
    if (!json_is_object(f))
      return sbx_err_field(err, field, "%s must be an object {path, content, encoding}", field);
    if (sbx_schema_only(f, field, allowed, err) < 0)
      return -1;
    json_t *path = json_object_get(f, "path"), *content = json_object_get(f, "content");
    json_t *enc = json_object_get(f, "encoding");
    snprintf(field, sizeof field, "files[%zu].path", i);
    if (!json_is_string(path) || sbx_schema_path(json_string_value(path), field, err) < 0)
      return err->code ? -1 : sbx_err_field(err, field, "%s must be a string", field);
    snprintf(field, sizeof field, "files[%zu].content", i);
    if (!json_is_string(content))
      return sbx_err_field(err, field, "%s must be a string", field);
    snprintf(field, sizeof field, "files[%zu].encoding", i);
    if (enc && !(json_is_string(enc) && (strcmp(json_string_value(enc), "utf-8") == 0 ||
                                         strcmp(json_string_value(enc), "base64") == 0)))
      return sbx_err_field(err, field, "%s must be \"utf-8\" or \"base64\"", field);
    if (enc && strcmp(json_string_value(enc), "base64") == 0) {
      size_t n = json_string_length(content), outlen;
      unsigned char *tmp = malloc(n + 1);
      int bad = !tmp || sodium_base642bin(tmp, n + 1, json_string_value(content), n, " \n\r",
                                          &outlen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0;
      free(tmp);
      snprintf(field, sizeof field, "files[%zu].content", i);
      if (bad)
        return sbx_err_field(err, field, "%s is not valid base64", field);
    }
  }
  return 0;
}

static int parse_collect(json_t *collect, struct sbx_error *err)
{
  if (!collect || json_is_null(collect))
    return 0;
  if (!json_is_array(collect) || json_array_size(collect) > 32)
    return sbx_err_field(err, "collect", "collect must be an array of at most 32 glob strings");
  size_t i;
  json_t *g;
  json_array_foreach(collect, i, g)
  {
    char field[32];
    snprintf(field, sizeof field, "collect[%zu]", i);
    if (!json_is_string(g))
      return sbx_err_field(err, field, "%s must be a string", field);
    if (sbx_schema_path(json_string_value(g), field, err) < 0)
      return -1;
  }
  return 0;
}

static int plan_parse(struct sbx_core *core, json_t *body, struct exec_plan *p,
                      struct sbx_error *err)
{
  memset(p, 0, sizeof *p);
  if (sbx_schema_only(body, "", exec_fields, err) < 0 ||
      sbx_core_sandbox_parse(core, body, &p->rq, err) < 0)
    return -1;
  p->files = json_object_get(body, "files");
  p->collect = json_object_get(body, "collect");
  if (parse_files(p->files, err) < 0 || parse_collect(p->collect, err) < 0)
    return -1;
  /* An image's own Entrypoint+Cmd runs when the request names no command
   * (known once the image is at hand: sbx_core_image_exec). */
  p->default_command =
      p->rq.image[0] && !json_object_get(body, "command") && !json_object_get(body, "language");
  return sbx_schema_exec_ex(body, p->rq.profile->max.timeout_s, false, p->default_command,
                            &p->spec, err);
}

/* The shared queue of a fleet: a taken execution's lease (renewed by the
 * node's heartbeat every second), and how often an idle worker looks. */
#define FLEET_LEASE_MS 10000
#define FLEET_POLL_MS 250

/* ---- JSON view ---- */

static json_t *execution_json(const struct sbx_execution_row *row, bool with_output)
{
  json_t *files = json_array();
  for (size_t i = 0; i < row->nfiles; i++)
    json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "path", row->files[i].path, "size",
                                           (json_int_t)row->files[i].size, "sha256",
                                           row->files[i].sha256));
  bool final = strcmp(row->status, "queued") != 0 && strcmp(row->status, "running") != 0;
  bool signalled = row->signal != 0;
  json_t *o = json_pack(
      "{s:s, s:s, s:o, s:s, s:o, s:o, s:b, s:b, s:I, s:I, s:o, s:{s:f, s:f, s:f, s:I, s:I}, s:o, "
      "s:o, s:o}",
      "id", row->id, "status", row->status, "reason",
      row->reason[0] ? json_string(row->reason) : json_null(), "profile", row->profile,
      "exit_code",
      final && !signalled && row->exit_code >= 0 ? json_integer(row->exit_code) : json_null(),
      "signal", signalled ? json_integer(row->signal) : json_null(), "stdout_truncated",
      row->std_out.truncated, "stderr_truncated", row->std_err.truncated, "stdout_dropped_bytes",
      (json_int_t)row->std_out.dropped, "stderr_dropped_bytes", (json_int_t)row->std_err.dropped,
      "files", files, "usage", "cpu_seconds", row->cpu_seconds, "memory_mb_seconds",
      row->memory_mb_seconds, "duration_seconds", row->duration_seconds, "memory_peak_bytes",
      (json_int_t)row->memory_peak_bytes, "oom_kills", (json_int_t)row->oom_kills, "created_at",
      sbx_time_json(row->created_at), "started_at", sbx_time_json(row->started_at),
      "finished_at", sbx_time_json(row->finished_at));
  if (with_output) {
    sbx_json_set_output(o, "stdout", row->std_out.buf, row->std_out.len);
    sbx_json_set_output(o, "stderr", row->std_err.buf, row->std_err.len);
  }
  json_t *e = row->error_json ? json_loads(row->error_json, 0, NULL) : NULL;
  json_object_set_new(o, "error", e ? e : json_null());
  json_t *md = row->metadata_json ? json_loads(row->metadata_json, 0, NULL) : NULL;
  json_object_set_new(o, "metadata", md ? md : json_object());
  json_object_set_new(o, "node_id", row->node_id[0] ? json_string(row->node_id) : json_null());
  return o;
}

static int not_found(struct sbx_error *err, const char *id)
{
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "execution %s not found", id);
  return sbx_err_fr(err, "Exécution %s introuvable", id);
}

/* ---- the queue (its policy: core/exec_queue.c) ---- */

static int queue_full_error(struct sbx_core *core, enum sbx_exec_queue_full why,
                            struct sbx_error *err)
{
  if (why == SBX_EXQ_NOMEM)
    return sbx_err_sys(err, ENOMEM, "execution queue");
  if (why == SBX_EXQ_FULL_TOTAL) {
    sbx_err_set(err, SBX_E_QUOTA, 0, "the execution queue is full (%u); retry later",
                core->cfg.queue_max);
    return sbx_err_fr(err, "La file d'exécution est pleine (%u) ; réessayez plus tard",
                      core->cfg.queue_max);
  }
  unsigned n = core->cfg.queue_max_per_tenant;
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: this tenant has %u executions queued and "
              "may have %u; retry when some have started",
              n, n);
  sbx_err_fr(err,
             "Quota dépassé : ce locataire a %u exécutions en attente et peut en avoir "
             "%u ; réessayez quand certaines auront démarré",
             n, n);
  snprintf(err->field, sizeof err->field, "queued_executions:%u", n); /* details (quota.h) */
  return -1;
}

static int queue_reserve(struct sbx_core *core, int64_t tenant, bool force,
                         struct sbx_exec_slot_rsv **rsv, struct sbx_error *err)
{
  pthread_mutex_lock(&core->q_lock);
  enum sbx_exec_queue_full why =
      core->exq ? sbx_exec_queue_reserve(core->exq, tenant, force, rsv) : SBX_EXQ_FULL_TOTAL;
  pthread_mutex_unlock(&core->q_lock);
  return why == SBX_EXQ_OK ? 0 : queue_full_error(core, why, err);
}

/* A row this daemon queues, kept (under q_lock) until a worker takes it.
 * The request hands it to the queue before it stores it, so that a
 * worker can bring the sandbox up while the row is written: the worker
 * writes nothing for it until the request says the row is stored, and
 * drops it if the write failed.  The worker starts from this copy
 * instead of reading the row back; the store's row is the same until the
 * worker's conditional start, which still decides. */
enum queued_state {
  QR_STORING,
  QR_STORED,
  QR_LOST, /* its write failed: the request was refused, nothing is to run */
};

struct sbx_queued_row {
  struct sbx_queued_row *next;
  struct sbx_execution_row row; /* its own strings, which the worker takes */
  enum queued_state state;
  unsigned refs; /* the storing request's, and the queue's, then its worker's */
};

/* Caller holds q_lock.  The copy of id, unlinked; NULL if none. */
static struct sbx_queued_row *queued_row_unlink(struct sbx_core *core, const char *id)
{
  for (struct sbx_queued_row **pp = &core->queued_rows; *pp; pp = &(*pp)->next)
    if (strcmp((*pp)->row.id, id) == 0) {
      struct sbx_queued_row *q = *pp;
      *pp = q->next;
      return q;
    }
  return NULL;
}

/* Caller holds q_lock (or is the only holder of q). */
static void queued_row_unref(struct sbx_queued_row *q)
{
  if (!q || --q->refs > 0)
    return;
  sbx_execution_row_free(&q->row);
  free(q);
}

/* A copy of row with its own strings, being stored; NULL without memory
 * (the worker then reads the row back). */
static struct sbx_queued_row *queued_row_copy(const struct sbx_execution_row *row)
{
  struct sbx_queued_row *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->row = *row;
  q->row.request_json = strdup(row->request_json);
  q->row.metadata_json = strdup(row->metadata_json);
  q->state = QR_STORING;
  q->refs = 2;
  if (q->row.request_json && q->row.metadata_json)
    return q;
  q->refs = 1;
  queued_row_unref(q);
  return NULL;
}

/* The queue is gone once shutdown ran: a request that reserved before
 * leaves its row in the store, for the next start.  copy (may be NULL):
 * the row, kept for the worker (the queue's reference). */
static void queue_commit(struct sbx_core *core, struct sbx_exec_slot_rsv *rsv, const char *id,
                         struct sbx_queued_row *copy)
{
  pthread_mutex_lock(&core->q_lock);
  if (core->exq) {
    sbx_exec_queue_commit(core->exq, rsv, id);
    if (copy) {
      copy->next = core->queued_rows;
      core->queued_rows = copy;
      copy = NULL;
    }
  } else {
    sbx_exec_queue_rsv_free(rsv);
  }
  queued_row_unref(copy);
  pthread_cond_signal(&core->q_cond);
  pthread_mutex_unlock(&core->q_lock);
}

/* The request's word on its row (stored or not), and its reference
 * dropped.  Not stored: out of the queue if no worker took it yet. */
static void queued_row_stored(struct sbx_core *core, struct sbx_queued_row *q, bool stored)
{
  pthread_mutex_lock(&core->q_lock);
  q->state = stored ? QR_STORED : QR_LOST;
  if (!stored && core->exq && sbx_exec_queue_remove(core->exq, q->row.tenant_id, q->row.id))
    queued_row_unref(queued_row_unlink(core, q->row.id));
  pthread_cond_broadcast(&core->stored_cond);
  queued_row_unref(q);
  pthread_mutex_unlock(&core->q_lock);
}

static void queue_unreserve(struct sbx_core *core, struct sbx_exec_slot_rsv *rsv)
{
  pthread_mutex_lock(&core->q_lock);
  if (core->exq)
    sbx_exec_queue_unreserve(core->exq, rsv);
  else
    sbx_exec_queue_rsv_free(rsv);
  pthread_mutex_unlock(&core->q_lock);
}

int sbx_executions_enqueue(struct sbx_core *core, const char *id, int64_t tenant_id)
{
  struct sbx_exec_slot_rsv *rsv = NULL;
  struct sbx_error err = {0};
  if (queue_reserve(core, tenant_id, true, &rsv, &err) < 0)
    return -1;
  sbx_quota_exec_track(core, tenant_id, id); /* recovery re-queues: count them (idempotent) */
  queue_commit(core, rsv, id, NULL);
  return 0;
}

/* ---- create ---- */

/* What create checks before anything is reserved: the profile can run it
 * here, now. */
static int plan_admit(struct sbx_core *core, const struct exec_plan *plan, struct sbx_error *err)
{
  const struct sbx_profile *prof = plan->rq.profile;
  /* waits while it is probing; the network fails closed, at once */
  if (sbx_core_profile_ready(core, prof, err) < 0 ||
      sbx_core_net_check(prof, plan->rq.policy, err) < 0)
    return -1;
  bool moves_files = json_array_size(plan->files) > 0 || json_array_size(plan->collect) > 0;
  if (!moves_files || (prof->driver->caps & SBX_CAP_FILES))
    return 0;
  sbx_err_set(err, SBX_E_CONFLICT, 0,
              "profile '%s' (driver %s) cannot move files in or out "
              "of its sandboxes: drop files/collect or use another profile",
              prof->name, prof->driver_name);
  return sbx_err_fr(err,
                    "Le profil « %s » (pilote %s) ne peut pas copier de fichiers dans ou "
                    "hors de ses bacs à sable : retirez files/collect ou choisissez un autre "
                    "profil",
                    prof->name, prof->driver_name);
}

/* The new row as it is stored: queued, the request and its metadata. */
static int queued_row(struct sbx_execution_row *row, json_t *body, struct sbx_error *err)
{
  snprintf(row->status, sizeof row->status, "queued");
  row->request_json = json_dumps(body, JSON_COMPACT);
  json_t *md = json_object_get(body, "metadata");
  row->metadata_json = json_is_object(md) ? json_dumps(md, JSON_COMPACT) : strdup("{}");
  row->exit_code = -1;
  row->created_at = row->updated_at = sbx_wall_s();
  return row->request_json && row->metadata_json ? 0 : sbx_err_sys(err, ENOMEM, "execution");
}

static json_t *queued_answer(const struct sbx_execution_row *row)
{
  return json_pack("{s:s, s:s, s:s}", "id", row->id, "status", "queued", "profile",
                   row->profile);
}

/* Hands the queued row to the queue with a copy of it and stores it
 * meanwhile (rsv is then taken); without a copy, stores it first. */
static int queue_insert(struct sbx_core *core, struct sbx_execution_row *row, json_t *body,
                        struct sbx_exec_slot_rsv **rsv, json_t **out, struct sbx_error *err)
{
  if (queued_row(row, body, err) < 0)
    return -1;
  struct sbx_queued_row *copy = queued_row_copy(row);
  if (copy) {
    queue_commit(core, *rsv, row->id, copy);
    *rsv = NULL;
  }
  int rc = core->store.ops->execution_insert(core->store.st, row, err);
  if (copy)
    queued_row_stored(core, copy, rc == 0);
  if (rc < 0)
    return -1;
  if (*rsv) {
    queue_commit(core, *rsv, row->id, NULL);
    *rsv = NULL;
  }
  *out = queued_answer(row);
  return 0;
}

/* In a fleet the queue is the database's: the row, counted there against
 * the tenant's bound (its executions quota, else the per-tenant queue
 * bound), is all there is to queue; some node's worker takes it. */
static int fleet_insert(struct sbx_core *core, const struct sbx_principal *who,
                        struct sbx_execution_row *row, json_t *body, json_t **out,
                        struct sbx_error *err)
{
  int64_t quota = sbx_quota_executions_limit(core, who), count = 0;
  int64_t limit = quota > 0 ? quota : (int64_t)core->cfg.queue_max_per_tenant;
  int rc = queued_row(row, body, err);
  if (rc == 0) {
    sbx_trace_park(row->id, who->tenant);
    rc = core->store.ops->fleet->exec_insert_capped(core->store.st, row, limit, &count, err);
  }
  if (rc < 0 && err->code == SBX_E_QUOTA && quota > 0)
    sbx_quota_executions_error(err, count, quota);
  else if (rc < 0 && err->code == SBX_E_QUOTA)
    queue_full_error(core, SBX_EXQ_FULL_TENANT, err);
  free(row->request_json);
  free(row->metadata_json);
  row->request_json = row->metadata_json = NULL;
  if (rc < 0)
    return -1;
  pthread_mutex_lock(&core->q_lock);
  pthread_cond_signal(&core->q_cond); /* a worker here may take it at once */
  pthread_mutex_unlock(&core->q_lock);
  *out = queued_answer(row);
  return 0;
}

int sbx_execution_check(struct sbx_core *core, json_t *body, struct sbx_error *err)
{
  struct exec_plan plan;
  int rc = plan_parse(core, body, &plan, err);
  plan_free(&plan);
  return rc;
}

int sbx_execution_create(struct sbx_core *core, const struct sbx_principal *who, json_t *body,
                         json_t **out, struct sbx_error *err)
{
  struct exec_plan plan;
  int rc = plan_parse(core, body, &plan, err);
  if (rc == 0)
    rc = sbx_quota_profile_check(core, who, plan.rq.profile->name, "profile", err);
  if (rc == 0)
    rc = plan_admit(core, &plan, err);
  struct sbx_execution_row row = {.tenant_id = who->tenant_id};
  sbx_random_id("exe", row.id, sizeof row.id);
  if (rc == 0)
    snprintf(row.profile, sizeof row.profile, "%s", plan.rq.profile->name);
  plan_free(&plan);
  if (rc < 0 || sbx_quota_exec_admit(core, who, row.id, err) < 0)
    return -1;
  if (sbx_fleet_on(core))
    return fleet_insert(core, who, &row, body, out, err);
  /* A place in the queue first: a request it cannot hold leaves no row. */
  struct sbx_exec_slot_rsv *rsv = NULL;
  rc = queue_reserve(core, who->tenant_id, false, &rsv, err);
  if (rc == 0) {
    sbx_trace_park(row.id, who->tenant); /* the worker's span continues this trace */
    rc = queue_insert(core, &row, body, &rsv, out, err);
  }
  if (rsv)
    queue_unreserve(core, rsv);
  if (rc < 0)
    sbx_quota_exec_end(core, row.tenant_id, row.id);
  free(row.request_json);
  free(row.metadata_json);
  return rc;
}

static struct sbx_running_exec *running_add(struct sbx_core *core, const char *id)
{
  struct sbx_running_exec *r = calloc(1, sizeof *r);
  if (!r || sbx_cancel_init(&r->cancel) < 0) {
    free(r);
    return NULL;
  }
  snprintf(r->id, sizeof r->id, "%s", id);
  pthread_mutex_lock(&core->q_lock);
  r->next = core->running;
  core->running = r;
  if (core->stopping)
    sbx_cancel_fire(&r->cancel, SBX_RS_DAEMON_SHUTDOWN);
  pthread_mutex_unlock(&core->q_lock);
  return r;
}

static void running_remove(struct sbx_core *core, struct sbx_running_exec *r)
{
  pthread_mutex_lock(&core->q_lock);
  for (struct sbx_running_exec **pp = &core->running; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  pthread_mutex_unlock(&core->q_lock);
  sbx_cancel_destroy(&r->cancel);
  free(r);
}

static void notify_done(struct sbx_core *core)
{
  pthread_mutex_lock(&core->q_lock);
  pthread_cond_broadcast(&core->done_cond);
  pthread_mutex_unlock(&core->q_lock);
}

/* ---- running one ---- */

struct collected {
  struct sbx_exec_file_blob *blobs;
  size_t n;
  size_t total;
};

static void collected_free(struct collected *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free((void *)c->blobs[i].path);
    free((void *)c->blobs[i].data);
  }
  free(c->blobs);
}

static int write_inputs(struct sbx_sandbox *sb, json_t *files, struct sbx_error *err)
{
  size_t i;
  json_t *f;
  json_array_foreach(files, i, f)
  {
    const char *path = json_string_value(json_object_get(f, "path"));
    json_t *content = json_object_get(f, "content"), *enc = json_object_get(f, "encoding");
    size_t n = json_string_length(content), len = n;
    _cleanup_free_ unsigned char *buf = malloc(n + 1);
    if (!buf)
      return sbx_err_sys(err, ENOMEM, "files");
    if (enc && strcmp(json_string_value(enc), "base64") == 0) {
      if (sodium_base642bin(buf, n + 1, json_string_value(content), n, " \n\r", &len, NULL,
                            sodium_base64_VARIANT_ORIGINAL) != 0)
        return sbx_err_field(err, "files", "invalid base64");
    } else {
      memcpy(buf, json_string_value(content), n);
    }
    if (sbx_sandbox_file_write(sb, path, buf, len, err) < 0)
      return sbx_err_prefix(err, "writing input file %s", path);
  }
  return 0;
}

static int collect_one(struct sbx_sandbox *sb, const char *path, struct collected *c,
                       struct sbx_error *err)
{
  int fd;
  uint64_t size;
  if (sbx_sandbox_file_open_read(sb, path, &fd, &size, err) < 0)
    return -1;
  _cleanup_close_ int cfd = fd;
  if (size > MAX_COLLECT_FILE_BYTES || c->total + size > MAX_COLLECT_TOTAL_BYTES)
    return sbx_err_set(err, SBX_E_TOO_LARGE, 0, "collected file %s is too large (%llu bytes)",
                       path, (unsigned long long)size);
  _cleanup_free_ char *data = malloc(size ? size : 1);
  if (!data)
    return sbx_err_sys(err, ENOMEM, "collect");
  ssize_t got = sbx_read_all(cfd, data, size);
  if (got < 0)
    return sbx_err_sys(err, errno, "reading %s", path);
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (unsigned char *)data, (unsigned long long)got);
  struct sbx_exec_file_blob *b = &c->blobs[c->n];
  sbx_hex(digest, sizeof digest, b->sha256);
  b->path = strdup(path);
  b->size = (size_t)got;
  b->data = steal_pointer(&data);
  c->n++;
  c->total += (size_t)got;
  return 0;
}

static void collect_outputs(struct sbx_sandbox *sb, json_t *collect, struct collected *c,
                            char *warn, size_t warnlen)
{
  c->blobs = calloc(MAX_COLLECT_FILES, sizeof *c->blobs);
  size_t i;
  json_t *g;
  json_array_foreach(collect, i, g)
  {
    char **paths = NULL;
    size_t n = 0;
    struct sbx_error err = {0};
    if (!c->blobs ||
        sbx_sandbox_glob(sb, json_string_value(g), &paths, &n, MAX_COLLECT_FILES, &err) < 0) {
      if (err.code != SBX_E_NOT_FOUND)
        snprintf(warn, warnlen, "collect %s: %s", json_string_value(g), err.msg);
      continue;
    }
    for (size_t k = 0; k < n; k++) {
      bool dup = false;
      for (size_t j = 0; j < c->n && !dup; j++)
        dup = strcmp(c->blobs[j].path, paths[k]) == 0;
      if (!dup && c->n < MAX_COLLECT_FILES && collect_one(sb, paths[k], c, &err) < 0)
        snprintf(warn, warnlen, "collect %s: %s", paths[k], err.msg);
      free(paths[k]);
    }
    free(paths);
  }
}

/* Reasons only an execution ends with: its request, image or input files
 * failed it before its command ran.  No runtime produces them, so they are
 * named here rather than in runtime/status.c (whose names a run ends with). */
#define RS_IMAGE_UNAVAILABLE "image_unavailable" /* not in the store, and not pullable */
#define RS_INVALID_REQUEST "invalid_request"     /* the stored request cannot run here */
#define RS_INPUT_FILES "input_files"             /* an input file could not be written */
#define RS_DISK "disk"                           /* ... because the sandbox's disk is full */
#define RS_INTERNAL "internal"                   /* the daemon itself failed (memory) */
#define RS_RUNTIME_UNAVAILABLE (sbx_reason_name(SBX_RS_RUNTIME_UNAVAILABLE))
#define RS_SANDBOX_LOST (sbx_reason_name(SBX_RS_SANDBOX_LOST))

static bool disk_full(const struct sbx_error *err)
{
  return err->errnum == ENOSPC || err->errnum == EDQUOT;
}

/* Copies res into row; row's own output/error buffers are released and
 * replaced by res's (which res keeps owning).  reason NULL: res's. */
static void fill_final(struct sbx_execution_row *row, const struct sbx_exec_result *res,
                       const char *reason)
{
  if (!reason)
    reason = sbx_result_reason(res);
  free(row->std_out.buf);
  free(row->std_err.buf);
  free(row->error_json);
  row->error_json = NULL;
  snprintf(row->status, sizeof row->status, "%s", sbx_status_name(res->status));
  snprintf(row->reason, sizeof row->reason, "%s", reason);
  row->exit_code = res->exit_code;
  row->signal = res->signal;
  row->std_out = res->std_out; /* lent: res keeps owning the buffers */
  row->std_err = res->std_err;
  row->cpu_seconds = res->cpu_seconds;
  row->duration_seconds = (double)res->duration_ms / 1000.0;
  row->memory_peak_bytes = res->memory_peak_bytes;
  row->oom_kills = res->oom_kills;
  /* Peak-memory × duration: an upper bound of the MB·s integral, which the
   * per-exec counters do not sample. */
  row->memory_mb_seconds = (double)res->memory_peak_bytes / 1048576.0 * row->duration_seconds;
  if (res->error[0]) {
    json_t *e = json_pack("{s:s, s:s}", "reason", reason, "message", res->error);
    row->error_json = json_dumps(e, JSON_COMPACT);
    json_decref(e);
  }
}

/* The result, retried: a write lost to a transient store error would
 * leave the row running forever (a lasting outage is corrected by
 * recovery at the next start).  A conflict (cancelled) is final. */
static void store_result(struct sbx_core *core, struct sbx_execution_row *row,
                         const struct collected *c, const struct sbx_usage_row *usage,
                         struct sbx_error *err)
{
  for (int attempt = 0; attempt < 4; attempt++) {
    sbx_err_clear(err);
    if (core->store.ops->execution_finish(core->store.st, row, c ? c->blobs : NULL, c ? c->n : 0,
                                          usage, err) == 0 ||
        err->code == SBX_E_CONFLICT)
      return;
    sbx_error("execution", "storing the result of %s: %s", row->id, err->msg);
    nanosleep(&(struct timespec){0, (10L << attempt) * 1000000L}, NULL);
  }
}

static void finish(struct sbx_core *core, struct sbx_execution_row *row,
                   const struct collected *c)
{
  struct sbx_error err = {0};
  row->finished_at = row->updated_at = sbx_wall_s();
  struct sbx_usage_row usage;
  sbx_obs_execution_usage(row, &usage);
  store_result(core, row, c, &usage, &err);
  if (err.code == SBX_E_NONE) /* stored by this call, its usage with it: once */
    sbx_obs_execution_done(core, row, &usage);
  sbx_info("execution", "%s %s reason=%s exit=%d cpu=%.3fs wall=%.3fs", row->id, row->status,
           row->reason, row->exit_code, row->cpu_seconds, row->duration_seconds);
  sbx_quota_exec_end(core, row->tenant_id, row->id);
  sbx_quota_cpu_add(core, row->tenant_id, row->cpu_seconds);
  notify_done(core);
}

static void finish_error(struct sbx_core *core, struct sbx_execution_row *row,
                         const char *reason, const char *msg)
{
  struct sbx_exec_result res = {.status = SBX_ST_ERROR, .exit_code = -1};
  snprintf(res.error, sizeof res.error, "%s", msg[0] ? msg : reason);
  fill_final(row, &res, reason);
  finish(core, row, NULL);
  free(row->error_json);
  row->error_json = NULL;
}

/* What a worker holds while it runs one execution; job_end releases it. */
struct job {
  struct sbx_execution_row row;
  json_t *body;
  struct exec_plan plan;
  struct sbx_exec_result res;
  struct collected col;
  struct sbx_core_box box;
  struct sbx_running_exec *run;
  struct sbx_span *span;
  char **env;
  struct sbx_queued_row *queued; /* the copy it started from (a reference), or NULL */
};

/* The worker's start: the copy kept at queueing time, else the store's. */
static int job_take(struct sbx_core *core, const struct sbx_exec_item *it, struct job *j,
                    struct sbx_error *err)
{
  pthread_mutex_lock(&core->q_lock);
  struct sbx_queued_row *q = queued_row_unlink(core, it->id);
  pthread_mutex_unlock(&core->q_lock);
  if (!q)
    return core->store.ops->execution_get(core->store.st, it->tenant_id, it->id, &j->row, err);
  j->row = q->row; /* its strings move to the job */
  q->row.request_json = q->row.metadata_json = NULL;
  j->queued = q;
  return 0;
}

/* Waits for the request that queued j to have stored its row: true once
 * it is (or was long before: no copy), false if it could not be stored
 * (the request was refused; nothing is to be written for it). */
static bool job_row_stored(struct sbx_core *core, struct job *j)
{
  if (!j->queued)
    return true;
  pthread_mutex_lock(&core->q_lock);
  while (j->queued->state == QR_STORING)
    pthread_cond_wait(&core->stored_cond, &core->q_lock);
  bool stored = j->queued->state == QR_STORED;
  pthread_mutex_unlock(&core->q_lock);
  return stored;
}

/* The job's failure, stored as its final result once its row is stored;
 * nothing when the row never was. */
static void job_fail(struct sbx_core *core, struct job *j, const char *reason, const char *msg)
{
  if (job_row_stored(core, j))
    finish_error(core, &j->row, reason, msg);
}

/* The stored request parsed, its profile settled and its cancel token
 * registered: 0 to go on; -1 when it is not to run now (finished with a
 * reason, or left queued). */
static int job_accept(struct sbx_core *core, struct job *j)
{
  struct sbx_error err = {0};
  j->body = json_loads(j->row.request_json ? j->row.request_json : "", 0, NULL);
  if (!j->body || plan_parse(core, j->body, &j->plan, &err) < 0) {
    /* A profile gone from this daemon's configuration, or limits over its new maxima. */
    job_fail(core, j,
             strcmp(err.field, "profile") == 0 ? RS_RUNTIME_UNAVAILABLE : RS_INVALID_REQUEST,
             err.msg[0] ? err.msg : "stored request unreadable");
    return -1;
  }
  /* Queued before the daemon restarted, or while its profile probes: it
   * starts once the probe is done, never on a driver not yet recovered.
   * Stopping: it stays queued for the next start. */
  if (sbx_core_profile_settle(core, j->plan.rq.profile) == SBX_PROFILE_PROBING)
    return -1;
  /* The cancel token is reachable before the row says running: a cancel
   * that reads "running" always finds a token to fire. */
  if (!(j->run = running_add(core, j->row.id))) {
    job_fail(core, j, RS_INTERNAL, "out of memory");
    return -1;
  }
  j->span = sbx_trace_op_begin_parked("sandbox.execution", j->row.id, j->row.tenant_id,
                                      j->row.profile, j->row.metadata_json); /* before env */
  return 0;
}

static const char *up_reason(enum sbx_box_stage failed)
{
  switch (failed) {
  case SBX_BOX_IMAGE: /* a first use pulls it here, off the HTTP thread */
    return RS_IMAGE_UNAVAILABLE;
  case SBX_BOX_REQUEST: /* no interpreter for its language, a User it lacks */
    return RS_INVALID_REQUEST;
  default:
    return RS_RUNTIME_UNAVAILABLE;
  }
}

/* Its sandbox up: 0; else finished with the reason.  Before the row says
 * running, and usually before it is even stored: this overlaps the
 * request's own writes (the queued row, then its audit event, on the HTTP
 * thread) instead of queueing behind them in the store. */
static int job_up(struct sbx_core *core, struct job *j)
{
  struct sbx_error err = {0};
  const struct sbx_profile *prof = j->plan.rq.profile;
  if (!prof->available) {
    job_fail(core, j, RS_RUNTIME_UNAVAILABLE, prof->reason);
    return -1;
  }
  if (sbx_core_net_check(prof, j->plan.rq.policy, &err) < 0) { /* the host may have changed */
    job_fail(core, j, RS_RUNTIME_UNAVAILABLE, err.msg);
    return -1;
  }
  struct sbx_box_want want = {.id = j->row.id,
                              .tenant_id = j->row.tenant_id,
                              .rq = &j->plan.rq,
                              .exec = &j->plan.spec,
                              .default_command = j->plan.default_command};
  enum sbx_box_stage failed;
  if (sbx_core_sandbox_up(core, &want, &j->box, &failed, &err) < 0) {
    job_fail(core, j, up_reason(failed), err.msg);
    return -1;
  }
  return 0;
}

/* The row marked running: 0 to go on; -1 when it is not to run (cancelled
 * while queued, or, in a fleet, taken by another node: nothing is written
 * then), or finished with the store's error. */
static int job_start(struct sbx_core *core, struct job *j)
{
  struct sbx_error err = {0};
  if (!job_row_stored(core, j)) {
    snprintf(j->row.status, sizeof j->row.status, "not_started"); /* for its span */
    return -1;
  }
  const char *node = sbx_fleet_on(core) ? sbx_fleet_node_id(core) : NULL;
  if (core->store.ops->execution_start(core->store.st, j->row.tenant_id, j->row.id, node,
                                       sbx_wall_s(), &err) < 0) {
    if (node && err.code == SBX_E_CONFLICT)
      sbx_metrics_fleet_claim("lost"); /* its lease ran out and another node took it */
    if (err.code != SBX_E_CONFLICT && err.code != SBX_E_NOT_FOUND) {
      job_fail(core, j, RS_INTERNAL, err.msg); /* not a cancel: the store */
      return -1;
    }
    snprintf(j->row.status, sizeof j->row.status, "not_started"); /* for its span */
    return -1;
  }
  snprintf(j->row.status, sizeof j->row.status, "running");
  return 0;
}

/* Its environment made and its input files in: 0; else finished with
 * the reason. */
static int job_prepare(struct sbx_core *core, struct job *j)
{
  struct sbx_error err = {0};
  struct sbx_net_attachment *net = j->box.net;
  if (!(j->env = sbx_run_env(sbx_core_image_env(j->box.image), net ? sbx_net_env(net) : NULL,
                             NULL, j->plan.spec.env))) {
    job_fail(core, j, RS_INTERNAL, "out of memory");
    return -1;
  }
  if (j->plan.files && write_inputs(j->box.sb, j->plan.files, &err) < 0) {
    job_fail(core, j, disk_full(&err) ? RS_DISK : RS_INPUT_FILES, err.msg);
    return -1;
  }
  return 0;
}

/* Runs the job with a capture of cap bytes per stream and finishes its row. */
static void job_run_captured(struct sbx_core *core, struct job *j, uint64_t cap)
{
  struct sbx_error err = {0};
  struct sbx_exec_result *res = &j->res;
  const struct sbx_limits *lim = &j->plan.rq.limits;
  if (sbx_run_spec(j->box.sb, &j->plan.spec, j->env, lim->timeout_s * 1000, cap, &j->run->cancel,
                   res, &err) < 0) {
    /* Writing a long `code` into a full sandbox, or the run's own cause. */
    job_fail(core, j,
             disk_full(&err)              ? RS_DISK
             : res->reason != SBX_RS_NONE ? sbx_reason_name(res->reason)
                                          : RS_SANDBOX_LOST,
             err.msg);
    return;
  }
  if (res->status == SBX_ST_KILLED && res->reason == SBX_RS_DAEMON_SHUTDOWN)
    snprintf(res->error, sizeof res->error, "the daemon shut down during the execution");
  else if (res->status == SBX_ST_KILLED && res->reason == SBX_RS_CANCELLED)
    snprintf(res->error, sizeof res->error, "cancelled by request");
  char warn[512] = "";
  if (j->plan.collect)
    collect_outputs(j->box.sb, j->plan.collect, &j->col, warn, sizeof warn);
  if (warn[0] && !res->error[0])
    snprintf(res->error, sizeof res->error, "%s", warn);
  fill_final(&j->row, res, NULL);
  finish(core, &j->row, &j->col);
  /* fill_final lent res's buffers to row: res frees them, row must not. */
  j->row.std_out.buf = j->row.std_err.buf = NULL;
}

static void job_run(struct sbx_core *core, struct job *j)
{
  /* The capture is charged to the output budgets like a session exec's,
   * until the row holding it is final. */
  const struct sbx_limits *lim = &j->plan.rq.limits;
  uint64_t held = 0,
           cap = sbx_res_output_take(core, j->row.tenant_id,
                                     lim->output_bytes ? lim->output_bytes : 1u << 20, &held);
  job_run_captured(core, j, cap);
  sbx_res_mem_give(j->row.tenant_id, held);
}

static void job_end(struct sbx_core *core, struct job *j)
{
  sbx_trace_op_end(j->span, "sandbox.execution.id", j->row.id, j->row.status, NULL);
  sbx_quota_exec_end(core, j->row.tenant_id, j->row.id);
  sbx_core_sandbox_down(&j->box);
  if (j->run)
    running_remove(core, j->run);
  sbx_strv_free(j->env);
  collected_free(&j->col);
  sbx_exec_result_free(&j->res);
  plan_free(&j->plan);
  json_decref(j->body);
  sbx_execution_row_free(&j->row);
  pthread_mutex_lock(&core->q_lock);
  queued_row_unref(j->queued);
  pthread_mutex_unlock(&core->q_lock);
}

static void run_one(struct sbx_core *core, const struct sbx_exec_item *it)
{
  struct sbx_error err = {0};
  struct job j = {0};
  if (job_take(core, it, &j, &err) < 0) {
    sbx_quota_exec_end(core, it->tenant_id, it->id);
    return;
  }
  if (job_accept(core, &j) == 0 && job_up(core, &j) == 0 && job_start(core, &j) == 0 &&
      job_prepare(core, &j) == 0)
    job_run(core, &j);
  job_end(core, &j);
}

/* A worker of a fleet node: takes from the shared queue while it has
 * work, else waits a poll interval (or a local create's signal). */
static bool fleet_take(struct sbx_core *core, struct sbx_exec_item *it)
{
  if (!sbx_fleet_runs_work(core))
    return false;
  struct sbx_error err = {0};
  bool expired = false;
  int got = core->store.ops->fleet->exec_claim(core->store.st, sbx_fleet_node_id(core),
                                               sbx_fleet_tenant_cap(core), FLEET_LEASE_MS,
                                               it->id, &it->tenant_id, &expired, &err);
  if (got < 0)
    sbx_warn("execution", "taking from the shared queue: %s", err.msg);
  if (got == 1)
    sbx_metrics_fleet_claim(expired ? "lease_expired" : "taken");
  return got == 1;
}

static void *fleet_worker_main(void *arg)
{
  struct sbx_core *core = arg;
  pthread_mutex_lock(&core->q_lock);
  while (!core->stopping) {
    pthread_mutex_unlock(&core->q_lock);
    struct sbx_exec_item it;
    bool got = fleet_take(core, &it);
    if (got)
      run_one(core, &it);
    pthread_mutex_lock(&core->q_lock);
    if (!got && !core->stopping) {
      struct timespec until;
      sbx_timespec_in(CLOCK_REALTIME, FLEET_POLL_MS, &until); /* q_cond: the default clock */
      pthread_cond_timedwait(&core->q_cond, &core->q_lock, &until);
    }
  }
  pthread_mutex_unlock(&core->q_lock);
  return NULL;
}

static void *worker_main(void *arg)
{
  struct sbx_core *core = arg;
  pthread_mutex_lock(&core->q_lock);
  for (;;) {
    struct sbx_exec_item it;
    while (!core->stopping && !sbx_exec_queue_pop(core->exq, core->tenant_running_cap, &it))
      pthread_cond_wait(&core->q_cond, &core->q_lock);
    if (core->stopping)
      break;
    pthread_mutex_unlock(&core->q_lock);
    run_one(core, &it);
    pthread_mutex_lock(&core->q_lock);
    sbx_exec_queue_done(core->exq, it.tenant_id);
    /* Under its cap again, the tenant may have work another idle worker
     * can take now. */
    pthread_cond_broadcast(&core->q_cond);
  }
  pthread_mutex_unlock(&core->q_lock);
  return NULL;
}

int sbx_executions_start_workers(struct sbx_core *core, struct sbx_error *err)
{
  unsigned per_tenant = core->cfg.queue_max_per_tenant ? core->cfg.queue_max_per_tenant : 256;
  core->cfg.queue_max_per_tenant = per_tenant; /* messages name it */
  /* One worker stays free for the other tenants however long one
   * tenant's executions are (a single worker must still serve someone). */
  core->tenant_running_cap = core->cfg.workers_per_tenant ? core->cfg.workers_per_tenant
                             : core->cfg.workers > 1      ? core->cfg.workers - 1
                                                          : 1;
  pthread_mutex_lock(&core->q_lock);
  core->exq = sbx_exec_queue_new(core->cfg.queue_max, per_tenant);
  pthread_mutex_unlock(&core->q_lock);
  core->workers = calloc(core->cfg.workers, sizeof *core->workers);
  if (!core->exq || !core->workers)
    return sbx_err_sys(err, ENOMEM, "workers");
  sbx_info("execution",
           "%u workers, at most %u running and %u queued per tenant, %u queued "
           "in all",
           core->cfg.workers, core->tenant_running_cap, per_tenant, core->cfg.queue_max);
  for (unsigned i = 0; i < core->cfg.workers; i++) {
    int rc = pthread_create(&core->workers[i], NULL,
                            sbx_fleet_on(core) ? fleet_worker_main : worker_main, core);
    if (rc != 0)
      return sbx_err_sys(err, rc, "starting execution worker");
    core->nworkers++;
  }
  return 0;
}

void sbx_executions_shutdown(struct sbx_core *core)
{
  pthread_mutex_lock(&core->q_lock);
  core->stopping = true;
  for (struct sbx_running_exec *r = core->running; r; r = r->next)
    sbx_cancel_fire(&r->cancel, SBX_RS_DAEMON_SHUTDOWN);
  pthread_cond_broadcast(&core->q_cond);
  pthread_cond_broadcast(&core->done_cond);
  pthread_mutex_unlock(&core->q_lock);
  for (unsigned i = 0; i < core->nworkers; i++)
    pthread_join(core->workers[i], NULL);
  core->nworkers = 0;
  free(core->workers);
  core->workers = NULL;
  pthread_mutex_lock(&core->q_lock); /* what was still queued stays queued in the store */
  sbx_exec_queue_free(core->exq);
  core->exq = NULL;
  while (core->queued_rows)
    queued_row_unref(queued_row_unlink(core, core->queued_rows->row.id));
  pthread_mutex_unlock(&core->q_lock);
}

/* ---- read, list, cancel, files ---- */

static bool is_final(const char *status)
{
  return strcmp(status, "queued") != 0 && strcmp(status, "running") != 0;
}

int sbx_execution_get(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                      double wait_s, json_t **out, struct sbx_error *err)
{
  uint64_t deadline = sbx_now_ms() + (uint64_t)(wait_s * 1000.0);
  for (;;) {
    struct sbx_execution_row row = {0};
    if (core->store.ops->execution_get(core->store.st, who->tenant_id, id, &row, err) < 0)
      return err->code == SBX_E_NOT_FOUND ? not_found(err, id) : -1;
    bool done = is_final(row.status);
    uint64_t now = sbx_now_ms();
    if (done || now >= deadline || core->stopping) {
      *out = execution_json(&row, true);
      sbx_execution_row_free(&row);
      return 0;
    }
    sbx_execution_row_free(&row);
    /* Wake on any completion (or at most every 250 ms as a safety net). */
    uint64_t wait_ms = deadline - now < 250 ? deadline - now : 250;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&core->q_lock);
    pthread_cond_timedwait(&core->done_cond, &core->q_lock, &ts);
    pthread_mutex_unlock(&core->q_lock);
  }
}

struct list_ctx {
  json_t *arr;
  int n;
};

static int list_cb(void *ctx, const struct sbx_execution_row *row)
{
  struct list_ctx *lc = ctx;
  json_array_append_new(lc->arr, execution_json(row, false));
  lc->n++;
  return 0;
}

int sbx_execution_list(struct sbx_core *core, const struct sbx_principal *who,
                       const char *status, const char *cursor, int limit, json_t **out,
                       struct sbx_error *err)
{
  enum sbx_status st;
  if (status && sbx_status_parse(status, &st) < 0) {
    sbx_err_field(err, "status", "unknown status '%s'", status);
    return sbx_err_fr(err, "Requête invalide : statut inconnu « %s »", status);
  }
  struct list_ctx lc = {.arr = json_array()};
  if (core->store.ops->execution_list(core->store.st, who->tenant_id, status,
                                      cursor ? cursor : "", limit + 1, list_cb, &lc, err) < 0) {
    json_decref(lc.arr);
    if (err->code == SBX_E_INVALID)
      snprintf(err->field, sizeof err->field, "cursor");
    return -1;
  }
  json_t *next = json_null();
  if (lc.n > limit) {
    json_array_remove(lc.arr, (size_t)limit);
    next = json_incref(json_object_get(json_array_get(lc.arr, (size_t)limit - 1), "id"));
  }
  *out = json_pack("{s:o, s:o}", "executions", lc.arr, "next_cursor", next);
  return 0;
}

int sbx_execution_cancel(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                         json_t **out, struct sbx_error *err)
{
  struct sbx_execution_row row = {0};
  if (core->store.ops->execution_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? not_found(err, id) : -1;
  bool live = strcmp(row.status, "queued") == 0 || strcmp(row.status, "running") == 0;
  if (strcmp(row.status, "queued") == 0) {
    struct sbx_exec_result res = {.status = SBX_ST_KILLED,
                                  .reason = SBX_RS_CANCELLED,
                                  .exit_code = -1};
    snprintf(res.error, sizeof res.error, "cancelled before it started");
    fill_final(&row, &res, NULL);
    finish(core, &row, NULL);
    /* The store says cancelled; no worker needs to look at it again, and
     * it no longer counts towards the tenant's queue bound. */
    pthread_mutex_lock(&core->q_lock);
    if (core->exq && sbx_exec_queue_remove(core->exq, row.tenant_id, id))
      queued_row_unref(queued_row_unlink(core, id));
    pthread_mutex_unlock(&core->q_lock);
  }
  /* A worker may have taken it between the read above and now: its token
   * (registered before the row says running) ends the run either way. */
  if (live) {
    pthread_mutex_lock(&core->q_lock);
    for (struct sbx_running_exec *r = core->running; r; r = r->next)
      if (strcmp(r->id, id) == 0)
        sbx_cancel_fire(&r->cancel, SBX_RS_CANCELLED);
    pthread_mutex_unlock(&core->q_lock);
  }
  sbx_execution_row_free(&row); /* fill_final left it owning only what it may free */
  /* Report the state after the cancel took effect (briefly wait for a running one). */
  return sbx_execution_get(core, who, id, 5.0, out, err);
}

int sbx_execution_file(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                       const char *path, void **data, size_t *size, struct sbx_error *err)
{
  struct sbx_execution_row row = {0};
  if (core->store.ops->execution_get(core->store.st, who->tenant_id, id, &row, err) < 0)
    return err->code == SBX_E_NOT_FOUND ? not_found(err, id) : -1;
  sbx_execution_row_free(&row);
  if (core->store.ops->execution_file_get(core->store.st, who->tenant_id, id, path, data, size,
                                          err) < 0) {
    if (err->code == SBX_E_NOT_FOUND) {
      sbx_err_set(err, SBX_E_NOT_FOUND, 0, "execution %s collected no file %s", id, path);
      sbx_err_fr(err, "L'exécution %s n'a collecté aucun fichier %s", id, path);
    }
    return -1;
  }
  return 0;
}
