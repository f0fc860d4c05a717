/* test_jsonschema.c — the valijson shim (core/jsonschema.h) and the
 * embedded contracts: every violation listed with its path, a depth bomb
 * refused before parsing, $ref loops refused rather than recursed into, and
 * cases of the JSON-Schema-Test-Suite's draft7 directory when Debian's
 * json-schema-test-suite is installed. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/contracts.h"
#include "core/jsonschema.h"

struct seen {
  char paths[32][128];
  char fr[32][256];
  int n;
};

static void collect(void *ctx, const char *path, const char *en, const char *fr)
{
  struct seen *s = ctx;
  (void)en;
  if (s->n < 32) {
    snprintf(s->paths[s->n], sizeof s->paths[0], "%s", path);
    snprintf(s->fr[s->n], sizeof s->fr[0], "%s", fr);
    s->n++;
  }
}

static int has_path(const struct seen *s, const char *path)
{
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->paths[i], path) == 0)
      return 1;
  return 0;
}

static struct sbx_jdoc *doc(const char *text)
{
  struct sbx_error err = {0};
  struct sbx_jdoc *d = sbx_jdoc_parse(text, strlen(text), &err);
  if (!d)
    fprintf(stderr, "parse: %s\n", err.msg);
  return d;
}

static struct sbx_jschema *manifest_schema(void)
{
  struct sbx_error err = {0};
  struct sbx_jdoc *d = doc(sbx_contracts[0].text);
  struct sbx_jschema *s = d ? sbx_jschema_compile(d, "", &err) : NULL;
  if (!s)
    fprintf(stderr, "compile: %s\n", err.msg);
  sbx_jdoc_free(d);
  return s;
}

/* Validates text against the tool-manifest contract. */
static int check_manifest(const char *text, struct seen *s)
{
  struct sbx_error err = {0};
  struct sbx_jschema *schema = manifest_schema();
  struct sbx_jdoc *d = doc(text);
  int rc = schema && d ? sbx_jschema_validate(schema, d, "", collect, s, &err) : -2;
  sbx_jdoc_free(d);
  sbx_jschema_free(schema);
  return rc;
}

static void test_contracts_embedded(void)
{
  CHECK(sbx_ncontracts == 1);
  CHECK_STR(sbx_contracts[0].name, "tool-manifest");
  CHECK(strlen(sbx_contracts[0].text) == sbx_contracts[0].len);
  struct sbx_error err = {0};
  struct sbx_jdoc *d = doc(sbx_contract_draft07);
  struct sbx_jschema *meta = d ? sbx_jschema_compile(d, "", &err) : NULL;
  CHECK(meta != NULL);
  /* The contract is itself a valid draft-07 schema. */
  struct sbx_jdoc *m = doc(sbx_contracts[0].text);
  struct seen s = {0};
  CHECK(meta && m && sbx_jschema_validate(meta, m, "", collect, &s, &err) == 0);
  sbx_jdoc_free(m);
  sbx_jschema_free(meta);
  sbx_jdoc_free(d);
}

static void test_valid(void)
{
  struct seen s = {0};
  CHECK(check_manifest(
            "{\"apiVersion\":\"sandboxd/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":"
            "\"add-numbers\",\"labels\":{\"team\":\"x\"}},\"spec\":{\"sandbox_profile\":"
            "\"process\",\"image\":\"host\",\"command\":[\"python3\",\"-c\",\"1\"],"
            "\"input_schema\":{\"type\":\"object\"},\"limits\":{\"cpu\":\"500m\","
            "\"memory\":\"256Mi\",\"timeout_s\":30},\"network\":{\"egress\":\"none\"},"
            "\"collect\":[\"out/*.json\"],\"timeout_s\":10}}",
            &s) == 0);
  struct seen t = {0};
  CHECK(
      check_manifest("{\"apiVersion\":\"sandboxd/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":"
                     "\"t\"},\"spec\":{\"sandbox_profile\":\"process\",\"image\":\"host\","
                     "\"language\":\"python\",\"entrypoint\":\"main.py\"}}",
                     &t) == 0);
}

static void test_every_violation(void)
{
  struct seen s = {0};
  int n = check_manifest("{\"apiVersion\":\"v2\",\"metadata\":{\"name\":\"Bad_Name\"},\"spec\":{"
                         "\"sandbox_profile\":\"process\",\"image\":\"host\",\"command\":\"ls\","
                         "\"limits\":{\"memory\":\"lots\"},\"extra\":1}}",
                         &s);
  for (int i = 0; i < s.n; i++)
    fprintf(stderr, "  violation %s | %s\n", s.paths[i], s.fr[i]);
  CHECK(n >= 5);
  CHECK(has_path(&s, ""));            /* kind missing */
  CHECK(has_path(&s, "/apiVersion")); /* const */
  CHECK(has_path(&s, "/metadata/name"));
  CHECK(has_path(&s, "/spec/command"));
  CHECK(has_path(&s, "/spec/limits/memory"));
  CHECK(has_path(&s, "/spec")); /* "extra" */
  int french = 0;
  for (int i = 0; i < s.n; i++)
    french += strstr(s.fr[i], "Propriété obligatoire manquante : 'kind'") != NULL;
  CHECK(french == 1);
}

static void test_depth_bomb(void)
{
  char bomb[400];
  memset(bomb, '[', 200);
  memset(bomb + 200, ']', 200);
  struct sbx_error err = {0};
  CHECK(sbx_jdoc_parse(bomb, sizeof bomb, &err) == NULL);
  CHECK(err.code == SBX_E_INVALID);
  CHECK(strstr(err.msg, "64 levels") != NULL);
  /* 64 levels are fine; brackets inside strings do not count. */
  char ok[128 + 16];
  memset(ok, '[', 64);
  memset(ok + 64, ']', 64);
  struct sbx_jdoc *at64 = sbx_jdoc_parse(ok, 128, &err);
  CHECK(at64 != NULL);
  sbx_jdoc_free(at64);
  const char *str =
      "[\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"]";
  struct sbx_jdoc *d = sbx_jdoc_parse(str, strlen(str), &err);
  CHECK(d != NULL);
  sbx_jdoc_free(d);
  CHECK(sbx_jdoc_parse("{\"a\":", 5, &err) == NULL);
  CHECK(strstr(err.msg, "not JSON") != NULL);
}

/* Returns the number of problems check_schema finds in text. */
static int schema_problems(const char *text, struct seen *s)
{
  struct sbx_error err = {0};
  struct sbx_jdoc *d = doc(text);
  int n = d ? sbx_jschema_check_schema(d, "", collect, s, &err) : -2;
  struct sbx_jschema *c = d ? sbx_jschema_compile(d, "", &err) : NULL;
  CHECK((n == 0) == (c != NULL)); /* compile refuses exactly what the check reports */
  sbx_jschema_free(c);
  sbx_jdoc_free(d);
  return n;
}

static void test_ref_loops(void)
{
  struct seen s = {0};
  /* A loop of bare $refs: valijson's parser alone would recurse for ever. */
  CHECK(schema_problems("{\"$ref\":\"#/definitions/a\",\"definitions\":{\"a\":{\"$ref\":"
                        "\"#/definitions/b\"},\"b\":{\"$ref\":\"#/definitions/a\"}}}",
                        &s) == 1);
  CHECK(schema_problems("{\"$ref\":\"#\"}", &s) == 1);
  /* In place through allOf/not: the validator would recurse for ever. */
  CHECK(schema_problems("{\"allOf\":[{\"$ref\":\"#\"}]}", &s) == 1);
  CHECK(schema_problems("{\"definitions\":{\"a\":{\"not\":{\"$ref\":\"#/definitions/a\"}}},"
                        "\"$ref\":\"#/definitions/a\"}",
                        &s) == 1);
  /* Remote, relative and unresolvable references are refused. */
  CHECK(schema_problems("{\"$ref\":\"http://example.com/s.json\"}", &s) == 1);
  CHECK(schema_problems("{\"properties\":{\"a\":{\"$ref\":\"other.json#/x\"}}}", &s) == 1);
  CHECK(schema_problems("{\"properties\":{\"a\":{\"$ref\":\"#/nope\"}}}", &s) == 1);
  CHECK(has_path(&s, "/properties/a/$ref"));
  /* A schema valijson cannot use is a violation (it would abort() without
   * VALIJSON_USE_EXCEPTIONS). */
  CHECK(schema_problems("{\"type\":\"objekt\"}", &s) == 1);
  CHECK(schema_problems("{\"required\":\"a\",\"minLength\":-1}", &s) >= 1);
  /* Recursion that descends into the value is fine and ends with it. */
  struct seen ok = {0};
  const char *tree = "{\"type\":\"object\",\"properties\":{\"child\":{\"$ref\":\"#\"},\"n\":{"
                     "\"type\":\"integer\"}}}";
  CHECK(schema_problems(tree, &ok) == 0);
  struct sbx_error err = {0};
  struct sbx_jdoc *sd = doc(tree);
  struct sbx_jschema *c = sbx_jschema_compile(sd, "", &err);
  struct sbx_jdoc *d = doc("{\"child\":{\"child\":{\"n\":\"x\"}}}");
  CHECK(c && d && sbx_jschema_validate(c, d, "", collect, &ok, &err) == 1);
  CHECK(has_path(&ok, "/child/child/n"));
  sbx_jdoc_free(d);
  sbx_jschema_free(c);
  sbx_jdoc_free(sd);
}

#define SUITE "/usr/share/json-schema-test-suite/tests/draft7/"

/* One file of the suite: every group whose schema compiles (remote refs do
 * not, by design) must give the expected verdict on every case. */
static void suite_file(const char *name, int *cases)
{
  char path[256];
  snprintf(path, sizeof path, SUITE "%s", name);
  json_error_t je;
  json_t *groups = json_load_file(path, 0, &je);
  CHECK(groups != NULL);
  size_t i, j;
  json_t *g, *t;
  json_array_foreach(groups, i, g)
  {
    char *schema_text = json_dumps(json_object_get(g, "schema"), JSON_ENCODE_ANY);
    struct sbx_error err = {0};
    struct sbx_jdoc *sd = sbx_jdoc_parse(schema_text, strlen(schema_text), &err);
    struct sbx_jschema *s = sd ? sbx_jschema_compile(sd, "", &err) : NULL;
    json_array_foreach(json_object_get(g, "tests"), j, t)
    {
      if (!s)
        break;
      char *data = json_dumps(json_object_get(t, "data"), JSON_ENCODE_ANY);
      struct sbx_jdoc *dd = sbx_jdoc_parse(data, strlen(data), &err);
      struct seen v = {0};
      int n = dd ? sbx_jschema_validate(s, dd, "", collect, &v, &err) : -1;
      int want_valid = json_is_true(json_object_get(t, "valid"));
      if ((n == 0) != want_valid)
        fprintf(stderr, "  %s: %s / %s: got %d violations\n", name,
                json_string_value(json_object_get(g, "description")),
                json_string_value(json_object_get(t, "description")), n);
      CHECK((n == 0) == want_valid);
      (*cases)++;
      sbx_jdoc_free(dd);
      free(data);
    }
    sbx_jschema_free(s);
    sbx_jdoc_free(sd);
    free(schema_text);
  }
  json_decref(groups);
}

static void test_suite(void)
{
  static const char *const files[] = {
      "type.json",      "required.json", "properties.json",   "additionalProperties.json",
      "enum.json",      "const.json",    "allOf.json",        "anyOf.json",
      "oneOf.json",     "not.json",      "items.json",        "minLength.json",
      "maxLength.json", "pattern.json",  "if-then-else.json", "ref.json",
  };
  FILE *f = fopen(SUITE "type.json", "r");
  if (!f) {
    fprintf(stderr, "  json-schema-test-suite not installed: suite cases skipped\n");
    return;
  }
  fclose(f);
  int cases = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    suite_file(files[i], &cases);
  fprintf(stderr, "  %d suite cases\n", cases);
  CHECK(cases > 100);
}

int main(void)
{
  CHECK_CASE(test_contracts_embedded);
  CHECK_CASE(test_valid);
  CHECK_CASE(test_every_violation);
  CHECK_CASE(test_depth_bomb);
  CHECK_CASE(test_ref_loops);
  CHECK_CASE(test_suite);
  return check_finish("test_jsonschema");
}
