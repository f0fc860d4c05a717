/* fuzz_policy.c — the egress policy a tenant writes (net/policy.c,
 * net/addr.c): the `network` object of a session or execution body,
 * parsed strictly, then matched against names and addresses taken from
 * the same input, plus the CIDR and host-name parsers on their own.
 * Input: JSON text; its bytes also seed the lookups. */
#include <arpa/inet.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "net/net.h"
#include "net/net_int.h"

static void probe_matches(const struct sbx_net_policy *p, const uint8_t *data, size_t size)
{
  uint8_t a[16] = {0};
  memcpy(a, data, size < 16 ? size : 16);
  uint16_t port = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;
  sbx_net_policy_match_addr(p, AF_INET, a, port);
  sbx_net_policy_match_addr(p, AF_INET6, a, port);
  sbx_net_policy_match_closed(p, AF_INET, a, port);
  sbx_net_policy_match_closed(p, AF_INET6, a, port);
  sbx_net_addr_closed(AF_INET, a);
  sbx_net_addr_closed(AF_INET6, a);
  for (size_t i = 0; i < p->nrules; i++) {
    if (p->rules[i].kind != SBX_NET_RULE_CIDR) {
      sbx_net_policy_match_name(p, p->rules[i].name, port);
      char sub[300];
      snprintf(sub, sizeof sub, "x.%s", p->rules[i].name);
      sbx_net_policy_match_name(p, sub, 0);
    }
  }
  json_decref(sbx_net_policy_json(p));
  sbx_net_policy_free(sbx_net_policy_dup(p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  json_error_t je;
  json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
  if (j) {
    struct sbx_net_policy *p = NULL;
    struct sbx_error err = {0};
    if (sbx_net_policy_parse(j, "network", &p, &err) == 0 && p) {
      probe_matches(p, data, size);
      sbx_net_policy_free(p);
    } else if (err.code != SBX_E_INVALID || !err.field[0]) {
      abort(); /* every refusal is a 400 naming the field */
    }
    json_decref(j);
  }
  char *s = strndup((const char *)data, size < 512 ? size : 512);
  if (s) {
    int family;
    uint8_t addr[16], prefix;
    bool hostbits;
    sbx_net_cidr_parse(s, &family, addr, &prefix, &hostbits);
    char out[254];
    sbx_net_name_normalize(s, out, sizeof out);
    free(s);
  }
  return 0;
}
