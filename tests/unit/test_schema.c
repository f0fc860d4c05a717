/* test_schema.c — request validation: every bad shape is refused with the
 * field named, every good one parsed exactly. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/profile.h"
#include "core/schema.h"
#include "net/net.h"

static json_t *J(const char *txt)
{
  json_error_t je;
  json_t *j = json_loads(txt, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  if (!j)
    fprintf(stderr, "bad test JSON: %s\n", txt);
  return j;
}

/* Validates an exec body; returns the field at fault ("" when accepted). */
static const char *exec_field(const char *txt)
{
  static struct sbx_error err;
  memset(&err, 0, sizeof err);
  json_t *j = J(txt);
  struct sbx_exec_spec s;
  int rc = sbx_schema_exec(j, 60, false, &s, &err);
  json_decref(j);
  if (rc == 0) {
    sbx_exec_spec_free(&s);
    return "";
  }
  CHECK(err.code == SBX_E_INVALID);
  CHECK(err.msg_fr[0] != '\0');
  return err.field;
}

static void test_exec(void)
{
  CHECK_STR(exec_field("{\"command\":[\"echo\",\"hi\"]}"), "");
  CHECK_STR(exec_field("{\"command\":[]}"), "command");
  CHECK_STR(exec_field("{\"command\":\"echo hi\"}"), "command");
  CHECK_STR(exec_field("{\"command\":[\"echo\",3]}"), "command[1]");
  CHECK_STR(exec_field("{\"command\":[\"\"]}"), "command[0]");
  CHECK_STR(exec_field("{\"command\":[\"a\\u0000b\"]}"), "command[0]");
  CHECK_STR(exec_field("{}"), "command");
  CHECK_STR(exec_field("{\"language\":\"cobol\",\"code\":\"x\"}"), "language");
  CHECK_STR(exec_field("{\"language\":\"python\"}"), "code");
  CHECK_STR(exec_field("{\"language\":\"python\",\"code\":\"1\",\"command\":[\"x\"]}"),
            "command");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"timeout_s\":\"5\"}"), "timeout_s");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"timeout_s\":0}"), "timeout_s");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"timeout_s\":61}"), "timeout_s");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"timeout_s\":0.5}"), "");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"env\":{\"A-B\":\"1\"}}"), "env.A-B");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"env\":{\"A\":1}}"), "env.A");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"env\":[\"A=1\"]}"), "env");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"stdin\":5}"), "stdin");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"background\":true}"), "background");
  CHECK_STR(exec_field("{\"command\":[\"x\"],\"cwd\":\"\"}"), "cwd");

  struct sbx_error err = {0};
  json_t *j = J("{\"language\":\"python\",\"code\":\"print(1)\",\"env\":{\"X\":\"y\"},"
                "\"stdin\":\"in\",\"cwd\":\"/tmp\"}");
  struct sbx_exec_spec s;
  CHECK(sbx_schema_exec(j, 60, false, &s, &err) == 0);
  CHECK_STR(s.argv[0], "python3");
  CHECK_STR(s.argv[1], "-c");
  CHECK_STR(s.argv[2], "print(1)");
  CHECK(s.argv[3] == NULL);
  CHECK_STR(s.env[0], "X=y");
  CHECK(s.stdin_len == 2 && memcmp(s.stdin_data, "in", 2) == 0);
  CHECK_STR(s.cwd, "/tmp");
  sbx_exec_spec_free(&s);
  json_decref(j);

  /* code longer than an argument may be: run from a file */
  size_t big = SBX_INLINE_CODE_MAX + 10;
  char *code = malloc(big + 1);
  memset(code, '#', big);
  code[big] = '\0';
  j = json_pack("{s:s, s:s}", "language", "node", "code", code);
  CHECK(sbx_schema_exec(j, 60, false, &s, &err) == 0);
  CHECK_STR(s.argv[0], "node");
  CHECK(s.argv[1] == NULL);
  CHECK(s.code && strlen(s.code) == big);
  CHECK_STR(s.code_ext, ".js");
  sbx_exec_spec_free(&s);
  json_decref(j);
  free(code);
}

static void test_limits(void)
{
  struct sbx_profile p;
  sbx_profile_defaults(&p, "small", "process");
  p.defaults.memory_bytes = 256ULL << 20;
  p.defaults.cpu_millis = 500;
  p.max.memory_bytes = 384ULL << 20;
  p.max.cpu_millis = 750;
  struct sbx_limits l;
  struct sbx_error err = {0};
  json_t *j = J("{\"cpu\":\"250m\",\"memory\":\"128Mi\",\"pids\":10,\"timeout_s\":5,"
                "\"disk\":\"64Mi\",\"output_bytes\":\"64Ki\"}");
  CHECK(sbx_schema_limits(j, &p, &l, &err) == 0);
  CHECK(l.cpu_millis == 250 && l.memory_bytes == 128ULL << 20 && l.pids == 10 &&
        l.timeout_s == 5 && l.disk_bytes == 64ULL << 20 && l.output_bytes == 64 << 10);
  json_decref(j);

  const char *bad[][2] = {
      {"{\"memory\":\"512Mi\"}", "limits.memory"}, /* above the maximum */
      {"{\"memory\":\"lots\"}", "limits.memory"},
      {"{\"memory\":true}", "limits.memory"},
      {"{\"cpu\":\"1\"}", "limits.cpu"}, /* above 750m */
      {"{\"cpu\":\"fast\"}", "limits.cpu"},
      {"{\"pids\":-1}", "limits.pids"},
      {"{\"pids\":1.5}", "limits.pids"},
      {"{\"gpu\":1}", "limits.gpu"},
      {"{\"disk\":\"0\"}", "limits.disk"},
      {"{\"timeout_s\":999999}", "limits.timeout_s"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&err, 0, sizeof err);
    j = J(bad[i][0]);
    CHECK(sbx_schema_limits(j, &p, &l, &err) < 0);
    CHECK_STR(err.field, bad[i][1]);
    json_decref(j);
  }
  /* missing limits take the profile's */
  CHECK(sbx_schema_limits(NULL, &p, &l, &err) == 0);
  CHECK(l.memory_bytes == 256ULL << 20 && l.timeout_s == p.default_timeout_s);
  j = J("[1]");
  CHECK(sbx_schema_limits(j, &p, &l, &err) < 0);
  json_decref(j);
  /* above the default, up to the maximum: accepted */
  j = J("{\"memory\":\"384Mi\",\"cpu\":\"750m\"}");
  CHECK(sbx_schema_limits(j, &p, &l, &err) == 0);
  CHECK(l.memory_bytes == 384ULL << 20 && l.cpu_millis == 750);
  json_decref(j);
}

/* Built-in maxima follow the host; defaults stay modest. */
static void test_host_max(void)
{
  struct sbx_limits m;
  sbx_limits_host_max(8, 16ULL << 30, &m);
  CHECK(m.cpu_millis == 8000 && m.memory_bytes == 8ULL << 30 && m.disk_bytes == 4ULL << 30);
  CHECK(m.pids == 4096 && m.timeout_s == 3600 && m.output_bytes == 16ULL << 20);
  sbx_limits_host_max(-1, 0, &m); /* sysconf failed: one CPU, 1 GiB assumed */
  CHECK(m.cpu_millis == 1000 && m.memory_bytes == 512ULL << 20);
  struct sbx_profile p;
  sbx_profile_defaults(&p, "x", "container");
  CHECK(p.defaults.cpu_millis == 1000 && p.defaults.memory_bytes == 512ULL << 20);
  CHECK(p.defaults.disk_bytes == 256ULL << 20 && p.defaults.pids == 256);
  CHECK(p.max.cpu_millis >= 1000 && p.max.memory_bytes > 0 && p.max.pids == 4096);
  /* an operator's default above the host maximum stays usable */
  struct sbx_profile big;
  sbx_profile_defaults(&big, "big", "process");
  big.defaults.cpu_millis = p.max.cpu_millis + 1000;
  struct sbx_profile_set set;
  struct sbx_error err = {0};
  CHECK(sbx_profiles_build(&big, 1, "container", &set, &err) == 0);
  const struct sbx_profile *b = sbx_profile_find(&set, "big", NULL);
  CHECK(b && b->max.cpu_millis == big.defaults.cpu_millis);
  CHECK(b && sbx_profile_state(b) == SBX_PROFILE_PROBING);
  sbx_profiles_free(&set);
}

static void test_network_metadata(void)
{
  struct sbx_error err = {0};
  struct sbx_net_policy *pol = NULL;
  CHECK(sbx_schema_network(NULL, "network", &pol, &err) == 0);
  CHECK(pol && pol->egress == SBX_NET_EGRESS_NONE && pol->nrules == 0);
  json_t *n = sbx_net_policy_json(pol);
  CHECK_STR(json_string_value(json_object_get(n, "egress")), "none");
  json_decref(n);
  sbx_net_policy_free(pol);
  pol = NULL;
  json_t *j = J("{\"egress\":\"open\"}");
  CHECK(sbx_schema_network(j, "network", &pol, &err) < 0);
  CHECK_STR(err.field, "network.egress");
  json_decref(j);
  j = J("{\"egress\":\"allowlist\",\"allow\":[\"pypi.org\",\"*.pythonhosted.org\","
        "\"203.0.113.0/24:8080\"]}");
  CHECK(sbx_schema_network(j, "network", &pol, &err) == 0);
  CHECK(pol && pol->egress == SBX_NET_EGRESS_ALLOWLIST && pol->nrules == 3);
  CHECK(sbx_net_policy_match_name(pol, "files.pythonhosted.org", 443) == 1);
  CHECK(sbx_net_policy_match_name(pol, "evil.org", 443) < 0);
  sbx_net_policy_free(pol);
  pol = NULL;
  json_decref(j);
  j = J("{\"egress\":\"allowlist\",\"allow\":[\"pypi.org\",\"bad name!\"]}");
  CHECK(sbx_schema_network(j, "network", &pol, &err) < 0);
  CHECK_STR(err.field, "network.allow[1]");
  json_decref(j);
  j = J("{\"egress\":\"none\",\"allow\":[\"x.org\"]}");
  CHECK(sbx_schema_network(j, "network", &pol, &err) < 0);
  json_decref(j);
  j = J("{\"project\":\"p\",\"n\":3}");
  CHECK(sbx_schema_metadata(j, "metadata", &err) < 0);
  CHECK_STR(err.field, "metadata.n");
  json_decref(j);
  int64_t ttl;
  j = J("60");
  CHECK(sbx_schema_ttl(j, 3600, &ttl, &err) == 0 && ttl == 60);
  json_decref(j);
  j = J("7200");
  CHECK(sbx_schema_ttl(j, 3600, &ttl, &err) < 0);
  json_decref(j);
  static const char *const allowed[] = {"a", NULL};
  j = J("{\"a\":1,\"b\":2}");
  CHECK(sbx_schema_only(j, "x.", allowed, &err) < 0);
  CHECK_STR(err.field, "x.b");
  json_decref(j);
}

int main(void)
{
  CHECK_CASE(test_exec);
  CHECK_CASE(test_limits);
  CHECK_CASE(test_host_max);
  CHECK_CASE(test_network_metadata);
  return check_finish("test_schema");
}
