/* tools.c — a tenant's tools: tool manifests applied (validated against the
 * tool-manifest contract, checked as the execution they will become, the
 * profile permitted to the tenant, stored all or nothing), listed, deleted,
 * and invoked — the caller's input validated against the tool's own input
 * schema, then queued as an ordinary execution (core/execution.c), so a
 * tool gateway never builds execution requests itself (docs/tools.md). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "core/core.h"
#include "core/internal.h"
#include "core/jsonschema.h"
#include "core/quota.h"
#include "core/schema.h"

#define TOOLS_BODY_MAX (1u << 20) /* an apply or an invoke body */
#define TOOLS_APPLY_MAX 64        /* documents in one apply */
#define TOOLS_PER_TENANT 1000

/* ---- violations ---- */

static void violation(json_t *list, long index, const char *path, const char *en, const char *fr)
{
  json_t *v = json_pack("{s:s, s:{s:s, s:s}}", "path", path, "message_i18n", "en", en, "fr",
                        fr[0] ? fr : en);
  if (v && index >= 0)
    json_object_set_new(v, "index", json_integer(index));
  json_array_append_new(list, v);
}

/* 400 naming how many violations details.violations lists; what and
 * what_fr say of what. */
static int violations_error(json_t *list, const char *what, const char *what_fr,
                            struct sbx_error *err)
{
  size_t n = json_array_size(list);
  sbx_err_set(err, SBX_E_INVALID, 0, "%s: %zu violation%s (details.violations lists them)", what,
              n, n == 1 ? "" : "s");
  return sbx_err_fr(err, "%s : %zu violation%s (details.violations les liste)", what_fr, n,
                    n == 1 ? "" : "s");
}

/* An execution field ("limits.memory", "network.allow[0]") as the manifest
 * pointer that set it ("/spec/limits/memory", "/spec/network/allow/0"). */
static void spec_pointer(const char *field, char *out, size_t size)
{
  static const struct {
    const char *field, *pointer;
  } names[] = {{"profile", "/spec/sandbox_profile"},
               {"command", "/spec/command"},
               {"language", "/spec/language"},
               {"stdin", "/spec"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(field, names[i].field, strlen(names[i].field)) == 0) {
      snprintf(out, size, "%s", names[i].pointer);
      return;
    }
  size_t n = (size_t)snprintf(out, size, "/spec%s", field[0] ? "/" : "");
  for (const char *p = field; *p && n + 2 < size; p++)
    if (*p == '.' || *p == '[')
      out[n++] = '/';
    else if (*p != ']')
      out[n++] = *p;
  out[n < size ? n : size - 1] = '\0';
}

/* ---- a manifest as the execution it becomes ---- */

static void copy_field(json_t *to, const char *to_key, json_t *from, const char *from_key)
{
  json_t *v = json_object_get(from, from_key);
  if (v)
    json_object_set(to, to_key, v);
}

/* The POST /v1/sandbox/executions body that runs the tool (manifest already
 * valid against the contract); input NULL leaves stdin out (apply's
 * check). */
static json_t *exec_body(json_t *manifest, json_int_t generation, json_t *input,
                         json_t *metadata)
{
  json_t *spec = json_object_get(manifest, "spec");
  const char *name =
      json_string_value(json_object_get(json_object_get(manifest, "metadata"), "name"));
  json_t *b = json_object();
  copy_field(b, "profile", spec, "sandbox_profile");
  copy_field(b, "image", spec, "image");
  copy_field(b, "command", spec, "command");
  copy_field(b, "network", spec, "network");
  copy_field(b, "collect", spec, "collect");
  json_t *lang = json_object_get(spec, "language");
  if (json_is_string(lang))
    json_object_set_new(b, "command",
                        json_pack("[s, O]", sbx_schema_interpreter(json_string_value(lang)),
                                  json_object_get(spec, "entrypoint")));
  json_t *limits = json_deep_copy(json_object_get(spec, "limits"));
  json_t *timeout = json_object_get(spec, "timeout_s");
  if (timeout && !json_object_get(limits, "timeout_s")) {
    if (!limits)
      limits = json_object();
    json_object_set(limits, "timeout_s", timeout);
  }
  if (limits)
    json_object_set_new(b, "limits", limits);
  _cleanup_free_ char *stdin_text =
      input ? json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  if (stdin_text)
    json_object_set_new(b, "stdin", json_string(stdin_text));
  json_object_set_new(b, "env", json_pack("{s:s}", "SANDBOXD_TOOL", name ? name : ""));
  json_t *md = json_is_object(metadata) ? json_deep_copy(metadata) : json_object();
  char gen[24];
  snprintf(gen, sizeof gen, "%lld", (long long)generation);
  json_object_set_new(md, "tool", json_string(name ? name : ""));
  json_object_set_new(md, "tool_generation", json_string(gen));
  json_object_set_new(b, "metadata", md);
  return b;
}

/* ---- apply ---- */

/* The documents of an apply body: one manifest, or {"items": [ … ]}. */
static json_t *apply_docs(json_t *body, struct sbx_error *err)
{
  json_t *items = json_object_get(body, "items");
  if (!json_is_object(body) || json_object_size(body) != 1 || !items)
    return json_pack("[O]", body);
  if (!json_is_array(items) || json_array_size(items) < 1 ||
      json_array_size(items) > TOOLS_APPLY_MAX) {
    sbx_err_field(err, "items", "items must be an array of 1 to %d tool manifests",
                  TOOLS_APPLY_MAX);
    sbx_err_fr(err, "items doit être un tableau de 1 à %d manifestes d'outil", TOOLS_APPLY_MAX);
    return NULL;
  }
  return json_incref(items);
}

/* What the execution the tool becomes would refuse (limits over the
 * profile's ceilings, an image reference it cannot parse, …), as a
 * violation at the manifest field that set it. */
static int check_as_execution(struct sbx_core *core, json_t *doc, long index, json_t *violations,
                              struct sbx_error *err)
{
  json_t *spec = json_object_get(doc, "spec");
  json_t *t1 = json_object_get(spec, "timeout_s");
  json_t *t2 = json_object_get(json_object_get(spec, "limits"), "timeout_s");
  if (t1 && t2 && json_number_value(t1) != json_number_value(t2))
    violation(violations, index, "/spec/timeout_s",
              "spec.timeout_s and spec.limits.timeout_s differ: give one of them",
              "spec.timeout_s et spec.limits.timeout_s diffèrent : n'en donnez qu'un");
  _cleanup_json_ json_t *b = exec_body(doc, 1, NULL, NULL);
  struct sbx_error e = {0};
  if (!b)
    return sbx_err_sys(err, ENOMEM, "manifest");
  if (sbx_execution_check(core, b, &e) == 0)
    return 0;
  if (e.code == SBX_E_INTERNAL) {
    *err = e;
    return -1;
  }
  char ptr[128];
  spec_pointer(e.field, ptr, sizeof ptr);
  violation(violations, index, ptr, e.msg, e.msg_fr);
  return 0;
}

/* Every violation of one manifest: the contract first; the execution
 * checks only for a document the contract accepts. */
static int check_doc(struct sbx_core *core, json_t *doc, long index, json_t *violations,
                     struct sbx_error *err)
{
  _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!text)
    return sbx_err_sys(err, ENOMEM, "manifest");
  _cleanup_json_ json_t *verdict =
      sbx_core_contract_validate(core, "tool-manifest", text, strlen(text), err);
  if (!verdict)
    return -1;
  json_t *found = json_object_get(verdict, "violations"), *v;
  size_t i;
  json_array_foreach(found, i, v)
  {
    json_object_set_new(v, "index", json_integer(index));
    json_array_append(violations, v);
  }
  return json_array_size(found) ? 0 : check_as_execution(core, doc, index, violations, err);
}

static const char *doc_name(json_t *doc)
{
  return json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
}

static const char *doc_profile(json_t *doc)
{
  return json_string_value(json_object_get(json_object_get(doc, "spec"), "sandbox_profile"));
}

/* Every document checked; names unique within the apply. */
static int check_docs(struct sbx_core *core, json_t *docs, json_t *violations,
                      struct sbx_error *err)
{
  size_t n = json_array_size(docs);
  for (size_t i = 0; i < n; i++)
    if (check_doc(core, json_array_get(docs, i), (long)i, violations, err) < 0)
      return sbx_err_prefix(err, "manifest %zu", i);
  for (size_t j = 1; j < n && json_array_size(violations) == 0; j++)
    for (size_t i = 0; i < j; i++)
      if (!strcmp(doc_name(json_array_get(docs, i)), doc_name(json_array_get(docs, j)))) {
        char en[160], fr[160];
        snprintf(en, sizeof en, "the name is also that of manifest %zu of this apply", i);
        snprintf(fr, sizeof fr, "le nom est aussi celui du manifeste %zu de cet envoi", i);
        violation(violations, (long)j, "/metadata/name", en, fr);
        break;
      }
  return 0;
}

/* The tenant may use every profile the manifests name. */
static int check_profiles(struct sbx_core *core, const struct sbx_principal *who, json_t *docs,
                          bool listed, struct sbx_error *err)
{
  for (size_t i = 0; i < json_array_size(docs); i++) {
    char field[64];
    snprintf(field, sizeof field,
             listed ? "items[%zu].spec.sandbox_profile" : "spec.sandbox_profile", i);
    if (sbx_quota_profile_check(core, who, doc_profile(json_array_get(docs, i)), field, err) < 0)
      return -1;
  }
  return 0;
}

/* The stored form of a manifest: compact JSON with sorted keys, so the
 * same document always has the same digest. */
static int make_row(json_t *doc, struct sbx_tool_row *row, struct sbx_error *err)
{
  memset(row, 0, sizeof *row);
  if (!(row->manifest_json = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS)))
    return sbx_err_sys(err, ENOMEM, "manifest");
  json_t *spec = json_object_get(doc, "spec");
  snprintf(row->name, sizeof row->name, "%s", doc_name(doc));
  snprintf(row->profile, sizeof row->profile, "%s", doc_profile(doc));
  snprintf(row->image, sizeof row->image, "%s",
           json_string_value(json_object_get(spec, "image")));
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)row->manifest_json,
                     strlen(row->manifest_json));
  memcpy(row->digest, "sha256:", 7);
  sbx_hex(digest, sizeof digest, row->digest + 7);
  return 0;
}

static json_t *tool_json(const struct sbx_tool_row *t)
{
  json_t *m = json_loads(t->manifest_json ? t->manifest_json : "", 0, NULL);
  return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:o, s:o}", "name", t->name, "profile",
                   t->profile, "image", t->image, "generation", (json_int_t)t->generation,
                   "digest", t->digest, "manifest", m ? m : json_null(), "created_at",
                   sbx_time_json(t->created_at), "updated_at", sbx_time_json(t->updated_at));
}

static const char *const action_names[] = {"created", "updated", "unchanged"};

/* What putting the rows would do, without storing (rows filled as the
 * store would); *added counts the new names. */
static int preview(struct sbx_core *core, int64_t tenant, struct sbx_tool_row *rows, size_t n,
                   enum sbx_tool_action *actions, int64_t *added, struct sbx_error *err)
{
  *added = 0;
  int64_t now = sbx_wall_s();
  for (size_t i = 0; i < n; i++) {
    struct sbx_tool_row old;
    if (core->store.ops->tool_get(core->store.st, tenant, rows[i].name, &old, err) < 0) {
      if (err->code != SBX_E_NOT_FOUND)
        return -1;
      sbx_err_clear(err);
      actions[i] = SBX_TOOL_CREATED;
      rows[i].generation = 1;
      rows[i].created_at = rows[i].updated_at = now;
      ++*added;
      continue;
    }
    bool same = strcmp(old.digest, rows[i].digest) == 0;
    actions[i] = same ? SBX_TOOL_UNCHANGED : SBX_TOOL_UPDATED;
    rows[i].generation = old.generation + !same;
    rows[i].created_at = old.created_at;
    rows[i].updated_at = same ? old.updated_at : now;
    sbx_tool_row_free(&old);
  }
  return 0;
}

static int tools_quota(struct sbx_core *core, int64_t tenant, int64_t added,
                       struct sbx_error *err)
{
  int64_t have = 0;
  if (added == 0)
    return 0;
  if (core->store.ops->tool_count(core->store.st, tenant, &have, err) < 0)
    return -1;
  if (have + added <= TOOLS_PER_TENANT)
    return 0;
  sbx_err_set(err, SBX_E_QUOTA, 0,
              "quota exceeded: this tenant has %lld tools and may have %d; delete some first",
              (long long)have, TOOLS_PER_TENANT);
  sbx_err_fr(err,
             "Quota dépassé : ce locataire a %lld outils et peut en avoir %d ; supprimez-en "
             "d'abord",
             (long long)have, TOOLS_PER_TENANT);
  snprintf(err->field, sizeof err->field, "tools:%d", TOOLS_PER_TENANT);
  return -1;
}

/* Stores (or previews) the checked documents; the answer's results. */
static json_t *apply_rows(struct sbx_core *core, const struct sbx_principal *who, json_t *docs,
                          bool dry_run, struct sbx_error *err)
{
  size_t n = json_array_size(docs);
  struct sbx_tool_row *rows = calloc(n, sizeof *rows);
  enum sbx_tool_action *actions = calloc(n, sizeof *actions);
  json_t *results = NULL;
  int64_t added = 0;
  int rc = rows && actions ? 0 : sbx_err_sys(err, ENOMEM, "apply");
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = make_row(json_array_get(docs, i), &rows[i], err);
  if (rc == 0)
    rc = preview(core, who->tenant_id, rows, n, actions, &added, err);
  if (rc == 0)
    rc = tools_quota(core, who->tenant_id, added, err);
  if (rc == 0 && !dry_run)
    rc = core->store.ops->tool_put(core->store.st, who->tenant_id, rows, n, actions, err);
  if (rc == 0) {
    results = json_array();
    for (size_t i = 0; i < n; i++)
      json_array_append_new(results,
                            json_pack("{s:s, s:s, s:o}", "name", rows[i].name, "action",
                                      action_names[actions[i]], "tool", tool_json(&rows[i])));
  }
  for (size_t i = 0; rows && i < n; i++)
    sbx_tool_row_free(&rows[i]);
  free(rows);
  free(actions);
  return results;
}

/* Refuses a body over the tools' limit, or one nesting too deep for the
 * validator (before jansson builds it). */
static json_t *load_body(const char *body, size_t len, bool empty_ok, struct sbx_error *err)
{
  if (len > TOOLS_BODY_MAX) {
    sbx_err_set(err, SBX_E_TOO_LARGE, 0, "the body is %zu bytes; at most %u here", len,
                TOOLS_BODY_MAX);
    sbx_err_fr(err, "le corps fait %zu octets ; au plus %u ici", len, TOOLS_BODY_MAX);
    return NULL;
  }
  if (len == 0 && empty_ok)
    return json_object();
  struct sbx_jdoc *d = sbx_jdoc_parse(body ? body : "", len, err);
  if (!d)
    return NULL;
  sbx_jdoc_free(d);
  json_error_t je;
  json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!j)
    sbx_err_field(err, "body", "invalid JSON: %s", je.text);
  return j;
}

json_t *sbx_tools_apply(struct sbx_core *core, const struct sbx_principal *who, const char *body,
                        size_t len, bool dry_run, json_t **violations, struct sbx_error *err)
{
  *violations = NULL;
  _cleanup_json_ json_t *j = load_body(body, len, false, err);
  _cleanup_json_ json_t *docs = j ? apply_docs(j, err) : NULL;
  if (!docs)
    return NULL;
  json_t *found = json_array();
  if (check_docs(core, docs, found, err) < 0) {
    json_decref(found);
    return NULL;
  }
  if (json_array_size(found)) {
    *violations = found;
    violations_error(found, "tool manifests refused", "manifestes d'outil refusés", err);
    return NULL;
  }
  json_decref(found);
  if (check_profiles(core, who, docs, json_object_get(j, "items") == docs, err) < 0)
    return NULL;
  json_t *results = apply_rows(core, who, docs, dry_run, err);
  return results ? json_pack("{s:b, s:o}", "dry_run", dry_run, "results", results) : NULL;
}

/* ---- read, list, delete ---- */

static int no_tool(struct sbx_error *err, const char *name)
{
  sbx_err_set(err, SBX_E_NOT_FOUND, 0, "no tool named '%s' (GET /v1/tools lists them)", name);
  return sbx_err_fr(err, "Aucun outil nommé « %s » (GET /v1/tools les liste)", name);
}

static int get_row(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                   struct sbx_tool_row *row, struct sbx_error *err)
{
  if (core->store.ops->tool_get(core->store.st, who->tenant_id, name, row, err) == 0)
    return 0;
  return err->code == SBX_E_NOT_FOUND ? no_tool(err, name) : -1;
}

json_t *sbx_tool_get(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                     struct sbx_error *err)
{
  struct sbx_tool_row row;
  if (get_row(core, who, name, &row, err) < 0)
    return NULL;
  json_t *out = tool_json(&row);
  sbx_tool_row_free(&row);
  return out;
}

static int list_one(void *ctx, const struct sbx_tool_row *row)
{
  json_array_append_new(ctx, tool_json(row));
  return 0;
}

json_t *sbx_tool_list(struct sbx_core *core, const struct sbx_principal *who, const char *cursor,
                      int limit, struct sbx_error *err)
{
  _cleanup_json_ json_t *tools = json_array();
  if (core->store.ops->tool_list(core->store.st, who->tenant_id, cursor ? cursor : "", limit + 1,
                                 list_one, tools, err) < 0)
    return NULL;
  json_t *next = json_null();
  if (json_array_size(tools) > (size_t)limit) {
    json_array_remove(tools, (size_t)limit);
    next = json_incref(json_object_get(json_array_get(tools, (size_t)limit - 1), "name"));
  }
  return json_pack("{s:O, s:o}", "tools", tools, "next_cursor", next);
}

int sbx_tool_delete(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                    struct sbx_error *err)
{
  if (core->store.ops->tool_delete(core->store.st, who->tenant_id, name, err) == 0)
    return 0;
  return err->code == SBX_E_NOT_FOUND ? no_tool(err, name) : -1;
}

/* ---- invoke ---- */

static void input_violation(void *ctx, const char *path, const char *en, const char *fr)
{
  violation(ctx, -1, path, en, fr);
}

/* The input's violations of the tool's input_schema, at /input/… of the
 * invoke body (input_text: that body with "input" in place). */
static int check_input(const char *manifest_json, const char *input_text, json_t *violations,
                       struct sbx_error *err)
{
  struct sbx_jdoc *m = sbx_jdoc_parse(manifest_json, strlen(manifest_json), err);
  if (!m)
    return -1;
  int rc = 0;
  if (sbx_jdoc_is_object(m, "/spec/input_schema")) {
    struct sbx_jdoc *in = sbx_jdoc_parse(input_text, strlen(input_text), err);
    struct sbx_jschema *s = in ? sbx_jschema_compile(m, "/spec/input_schema", err) : NULL;
    rc = s ? sbx_jschema_validate(s, in, "/input", input_violation, violations, err) : -1;
    sbx_jschema_free(s);
    sbx_jdoc_free(in);
  }
  sbx_jdoc_free(m);
  return rc < 0 ? -1 : 0;
}

/* The execution that runs the tool with the caller's input and metadata. */
static json_t *run_tool(struct sbx_core *core, const struct sbx_principal *who, json_t *manifest,
                        const struct sbx_tool_row *row, json_t *req, struct sbx_error *err)
{
  _cleanup_json_ json_t *b =
      exec_body(manifest, (json_int_t)row->generation, json_object_get(req, "input"),
                json_object_get(req, "metadata"));
  json_t *created = NULL;
  if (!b)
    sbx_err_sys(err, ENOMEM, "tool %s", row->name);
  else if (sbx_execution_create(core, who, b, &created, err) == 0) {
    json_object_set_new(created, "tool", json_string(row->name));
    json_object_set_new(created, "generation", json_integer((json_int_t)row->generation));
  }
  return created;
}

/* The invoke body: {"input": …, "metadata": {…}}, input {} when absent. */
static json_t *invoke_request(const char *body, size_t len, struct sbx_error *err)
{
  static const char *const allowed[] = {"input", "metadata", NULL};
  json_t *j = load_body(body, len, true, err);
  if (j && !json_is_object(j))
    sbx_err_field(err, "body", "the body must be a JSON object: {\"input\": …}");
  else if (j && sbx_schema_only(j, "", allowed, err) == 0) {
    if (!json_object_get(j, "input"))
      json_object_set_new(j, "input", json_object());
    return j;
  }
  json_decref(j);
  return NULL;
}

json_t *sbx_tool_invoke(struct sbx_core *core, const struct sbx_principal *who, const char *name,
                        const char *body, size_t len, json_t **violations, struct sbx_error *err)
{
  *violations = NULL;
  _cleanup_json_ json_t *req = invoke_request(body, len, err);
  struct sbx_tool_row row;
  if (!req || get_row(core, who, name, &row, err) < 0)
    return NULL;
  _cleanup_json_ json_t *manifest = json_loads(row.manifest_json, 0, NULL);
  _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
  _cleanup_json_ json_t *found = json_array();
  json_t *out = NULL;
  if (!manifest || !text || !found)
    sbx_err_sys(err, ENOMEM, "tool %s", name);
  else if (sbx_quota_profile_check(core, who, row.profile, "profile", err) == 0 &&
           check_input(row.manifest_json, text, found, err) == 0) {
    if (json_array_size(found)) {
      *violations = json_incref(found);
      violations_error(found, "input refused", "entrée refusée", err);
    } else {
      out = run_tool(core, who, manifest, &row, req, err);
    }
  }
  sbx_tool_row_free(&row);
  return out;
}
