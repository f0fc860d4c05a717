/* fuzz_dns.c — the DNS responder's answer to one query from a sandbox
 * (net/dns.c sbx_net_dns_answer, what its UDP and TCP paths call): header
 * checks, dn_expand of the question, name normalisation, the policy
 * match, the answer built from pinned addresses (no upstream: nothing
 * leaves this process).  The first input byte picks the asker: the
 * registered sandbox over IPv4 or IPv6, or a stranger; the rest is the
 * query.  nft and the decision log are seams here, as in test_net.c. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "net/net.h"
#include "net/net_int.h"

int sbx_net_nft_learn(const struct sbx_net_peer *peer, int family, const void *addr,
                      uint16_t port, unsigned ttl_s)
{
  (void)peer, (void)family, (void)addr, (void)port;
  return ttl_s % 7 == 3 ? -1 : 0; /* now and then a failed nft update */
}

void sbx_net_decide(const struct sbx_net_decision *d) { (void)d; }

#define PEER4 "198.18.0.2"
#define PEER6 "2001:db8::2"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  static const char *const pins[] = {"pypi.org=198.51.100.7",
                                     "pypi.org=2001:db8::7",
                                     "files.pythonhosted.org=203.0.113.9",
                                     "closed.example.com=127.0.0.1",
                                     "meta.example.com=169.254.169.254",
                                     "many.example.com=198.51.100.1",
                                     "many.example.com=198.51.100.2",
                                     "many.example.com=198.51.100.3",
                                     "many.example.com=2001:db8::3",
                                     "many.example.com=2001:db8::4",
                                     NULL};
  struct sbx_error err = {0};
  if (sbx_net_resolve_configure(pins, NULL, &err) < 0)
    abort();
  json_t *net = json_pack("{s:s, s:[s,s,s,s,s,s]}", "egress", "allowlist", "allow", "pypi.org",
                          "*.pythonhosted.org", "closed.example.com", "meta.example.com",
                          "many.example.com:443", "198.51.100.0/24");
  struct sbx_net_policy *p = NULL;
  if (sbx_net_policy_parse(net, "network", &p, &err) < 0)
    abort();
  json_decref(net);
  struct sbx_net_peer peer = {.sandbox_id = "sess-fuzz", .tenant = "fuzz", .ifname = "sbxfuzz0"};
  inet_pton(AF_INET, PEER4, &peer.addr4);
  inet_pton(AF_INET6, PEER6, &peer.addr6);
  if (sbx_net_registry_put(&peer, p) < 0)
    abort();
  sbx_net_policy_free(p);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct sockaddr_storage from = {0};
  unsigned who = data[0] % 3;
  if (who == 1) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&from;
    s6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, PEER6, &s6->sin6_addr);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&from;
    s4->sin_family = AF_INET;
    inet_pton(AF_INET, who == 0 ? PEER4 : "198.18.0.99", &s4->sin_addr);
  }
  /* The responder drops queries over 512 bytes before answering. */
  size_t qlen = size - 1 > 512 ? 512 : size - 1;
  uint8_t *q = malloc(qlen ? qlen : 1);
  memcpy(q, data + 1, qlen);
  uint8_t r[512 + 64];
  memset(r + 512, 0xa5, 64); /* a canary past RMAX */
  size_t n = sbx_net_dns_answer(q, qlen, &from, r);
  if (n > 512)
    abort();
  for (size_t i = 512; i < sizeof r; i++)
    if (r[i] != 0xa5)
      abort();
  free(q);
  return 0;
}
