/* test_net.c — the net module's policy services: policy parsing (every bad
 * entry refused with its field), matching, the always-closed ranges, the
 * registry, resolution (pins, and a real upstream over UDP/TCP on
 * loopback), and the DNS responder end to end over loopback, queried with
 * libresolv's message parser as the client.
 *
 * sbx_net_nft_learn (nft.c) and sbx_net_decide (net.c) are the seams the
 * responder calls out through; they are recorded here, not tested. */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net/net.h"
#include "net/net_int.h"

/* ---- seams ----------------------------------------------------------------- */

struct learned {
  char sandbox[96];
  int family;
  uint8_t addr[16];
  uint16_t port;
  unsigned ttl;
};
static pthread_mutex_t seam_mu = PTHREAD_MUTEX_INITIALIZER;
static struct learned learned[256];
static int nlearned;
static bool learn_fails;

int sbx_net_nft_learn(const struct sbx_net_peer *peer, int family, const void *addr,
                      uint16_t port, unsigned ttl_s)
{
  pthread_mutex_lock(&seam_mu);
  int rc = learn_fails ? -1 : 0;
  if (!learn_fails && nlearned < 256) {
    struct learned *l = &learned[nlearned++];
    snprintf(l->sandbox, sizeof l->sandbox, "%s", peer->sandbox_id);
    l->family = family;
    memcpy(l->addr, addr, family == AF_INET ? 4 : 16);
    l->port = port;
    l->ttl = ttl_s;
  }
  pthread_mutex_unlock(&seam_mu);
  return rc;
}

struct decision {
  char dest[256], rule[300], reason[128], proto[16], sandbox[96];
  bool allowed;
};
static struct decision last_decision;
static int ndecisions;

void sbx_net_decide(const struct sbx_net_decision *d)
{
  pthread_mutex_lock(&seam_mu);
  struct decision *x = &last_decision;
  memset(x, 0, sizeof *x);
  snprintf(x->dest, sizeof x->dest, "%s", d->dest ? d->dest : "");
  snprintf(x->rule, sizeof x->rule, "%s", d->rule ? d->rule : "");
  snprintf(x->reason, sizeof x->reason, "%s", d->reason ? d->reason : "");
  snprintf(x->proto, sizeof x->proto, "%s", d->proto ? d->proto : "");
  snprintf(x->sandbox, sizeof x->sandbox, "%s", d->sandbox_id ? d->sandbox_id : "");
  x->allowed = d->allowed;
  ndecisions++;
  pthread_mutex_unlock(&seam_mu);
}

static void seams_reset(void)
{
  pthread_mutex_lock(&seam_mu);
  nlearned = 0;
  ndecisions = 0;
  learn_fails = false;
  memset(&last_decision, 0, sizeof last_decision);
  pthread_mutex_unlock(&seam_mu);
}

/* ---- helpers ------------------------------------------------------------------ */

static json_t *J(const char *txt)
{
  json_error_t je;
  json_t *j = json_loads(txt, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
  if (!j)
    fprintf(stderr, "bad test JSON: %s (%s)\n", txt, je.text);
  return j;
}

/* Parses {"egress":"allowlist","allow":[entries…]} from a JSON array text. */
static struct sbx_net_policy *allow(const char *arr)
{
  char buf[4096];
  snprintf(buf, sizeof buf, "{\"egress\":\"allowlist\",\"allow\":%s}", arr);
  json_t *j = J(buf);
  struct sbx_net_policy *p = NULL;
  struct sbx_error err = {0};
  if (sbx_net_policy_parse(j, "network", &p, &err) < 0)
    fprintf(stderr, "policy %s refused: %s\n", arr, err.msg);
  json_decref(j);
  return p;
}

static struct sbx_error parse_err(const char *txt)
{
  struct sbx_error err = {0};
  json_t *j = J(txt);
  struct sbx_net_policy *p = NULL;
  int rc = sbx_net_policy_parse(j, "network", &p, &err);
  CHECK(rc < 0);
  CHECK(p == NULL);
  if (rc == 0)
    fprintf(stderr, "accepted: %s\n", txt);
  sbx_net_policy_free(p);
  json_decref(j);
  return err;
}

static void ip(int family, const char *s, uint8_t *out)
{
  memset(out, 0, 16);
  if (inet_pton(family, s, out) != 1)
    fprintf(stderr, "bad test address %s\n", s);
}

/* ---- policy ------------------------------------------------------------------ */

struct good {
  const char *entry;
  enum sbx_net_rule_kind kind;
  const char *name; /* DOMAIN/WILDCARD name, or CIDR network text */
  int prefix;
  int port;
};

static void test_policy_good(void)
{
  static const struct good g[] = {
      {"pypi.org", SBX_NET_RULE_DOMAIN, "pypi.org", 0, 0},
      {"PyPI.Org.", SBX_NET_RULE_DOMAIN, "pypi.org", 0, 0},
      {"pypi.org:8080", SBX_NET_RULE_DOMAIN, "pypi.org", 0, 8080},
      {"*.pythonhosted.org", SBX_NET_RULE_WILDCARD, "pythonhosted.org", 0, 0},
      {"*.Example.org:443", SBX_NET_RULE_WILDCARD, "example.org", 0, 443},
      {"xn--bcher-kva.example", SBX_NET_RULE_DOMAIN, "xn--bcher-kva.example", 0, 0},
      {"a-b.c-d.example", SBX_NET_RULE_DOMAIN, "a-b.c-d.example", 0, 0},
      {"3com.example", SBX_NET_RULE_DOMAIN, "3com.example", 0, 0},
      {"198.51.100.7", SBX_NET_RULE_CIDR, "198.51.100.7", 32, 0},
      {"198.51.100.7:7", SBX_NET_RULE_CIDR, "198.51.100.7", 32, 7},
      {"203.0.113.0/24", SBX_NET_RULE_CIDR, "203.0.113.0", 24, 0},
      {"203.0.113.0/24:8080", SBX_NET_RULE_CIDR, "203.0.113.0", 24, 8080},
      {"0.0.0.0/0", SBX_NET_RULE_CIDR, "0.0.0.0", 0, 0},
      {"10.0.0.0/8", SBX_NET_RULE_CIDR, "10.0.0.0", 8, 0},
      {"2001:db8::/32", SBX_NET_RULE_CIDR, "2001:db8::", 32, 0},
      {"2001:DB8::1", SBX_NET_RULE_CIDR, "2001:db8::1", 128, 0},
      {"[2001:db8::1]", SBX_NET_RULE_CIDR, "2001:db8::1", 128, 0},
      {"[2001:db8::1]:443", SBX_NET_RULE_CIDR, "2001:db8::1", 128, 443},
      {"[2001:db8::/32]:65535", SBX_NET_RULE_CIDR, "2001:db8::", 32, 65535},
      {"::ffff:198.51.100.7", SBX_NET_RULE_CIDR, "::ffff:198.51.100.7", 128, 0},
      {"[2001:db8::1:443]", SBX_NET_RULE_CIDR, "2001:db8::1:443", 128, 0},
      {"2001:db8::443", SBX_NET_RULE_CIDR, "2001:db8::443", 128, 0},
      {"2001:db8:0:0:0:0:1:443", SBX_NET_RULE_CIDR, "2001:db8::1:443", 128, 0},
      {"2001:db8::a", SBX_NET_RULE_CIDR, "2001:db8::a", 128, 0},
  };
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
    char arr[400];
    snprintf(arr, sizeof arr, "[\"%s\"]", g[i].entry);
    struct sbx_net_policy *p = allow(arr);
    CHECK(p != NULL);
    if (!p)
      continue;
    CHECK(p->egress == SBX_NET_EGRESS_ALLOWLIST);
    CHECK(p->nrules == 1);
    const struct sbx_net_rule *r = &p->rules[0];
    CHECK(r->kind == g[i].kind);
    CHECK(r->port == g[i].port);
    CHECK_STR(r->text, g[i].entry);
    if (r->kind == SBX_NET_RULE_CIDR) {
      char net[INET6_ADDRSTRLEN];
      inet_ntop(r->family, r->addr, net, sizeof net);
      CHECK_STR(net, g[i].name);
      CHECK(r->prefix == g[i].prefix);
    } else {
      CHECK_STR(r->name, g[i].name);
    }
    sbx_net_policy_free(p);
  }
  /* 63-character label, 253-character name: the limits themselves. */
  char arr[600], lab[64];
  memset(lab, 'a', 63);
  lab[63] = '\0';
  snprintf(arr, sizeof arr, "[\"%s.example\", \"%s.%s.%s.%.61s\"]", lab, lab, lab, lab, lab);
  struct sbx_net_policy *p = allow(arr);
  CHECK(p && p->nrules == 2 && strlen(p->rules[1].name) == 253);
  sbx_net_policy_free(p);
}

struct bad {
  const char *entry; /* JSON value (string literal or other) */
  const char *msg;   /* part of the message */
};

static void test_policy_bad_entries(void)
{
  char l64[65], name254[300];
  memset(l64, 'a', 64);
  l64[64] = '\0';
  memset(name254, 'a', 63);
  snprintf(name254 + 63, sizeof name254 - 63, ".%.63s.%.63s.%.62s", l64, l64, l64);
  char e64[100], e254[320];
  snprintf(e64, sizeof e64, "\"%s.example\"", l64);
  snprintf(e254, sizeof e254, "\"%s\"", name254);
  const struct bad b[] = {
      {"\"\"", "empty entry"},
      {"\"pypi\"", "at least two labels"},
      {"\"*.org\"", "at least two labels"},
      {"\"*pypi.org\"", "wildcard must be"},
      {"\"a.*.org\"", "wildcard must be"},
      {"\"*.*.org\"", "only once"},
      {"\"*\"", "wildcard must be"},
      {"\"pypi.org:0\"", "1 to 65535"},
      {"\"pypi.org:65536\"", "1 to 65535"},
      {"\"pypi.org:\"", "1 to 65535"},
      {"\"pypi.org:http\"", "1 to 65535"},
      {"\"pypi.org:-1\"", "1 to 65535"},
      {"\"pypi.org:123456\"", "1 to 65535"},
      {"\"pypi..org\"", "empty label"},
      {"\".pypi.org\"", "empty label"},
      {"\"-a.org\"", "begin or end"},
      {"\"a-.org\"", "begin or end"},
      {"\"a_b.org\"", "letters, digits"},
      {"\"pypi.org \"", "space"},
      {"\"a b.org\"", "space"},
      {"\"\\u00fcber.org\"", "non-ASCII"},
      {"\"a\\u0000b.org\"", "NUL"},
      {e64, "63 characters"},
      {e254, "253 characters"},
      {"\"203.0.113.1/24\"", "did you mean 203.0.113.0/24?"},
      {"\"2001:db8::1/32\"", "did you mean 2001:db8::/32?"},
      {"\"198.51.100.7/33\"", "not a valid CIDR"},
      {"\"198.51.100.7/\"", "not a valid CIDR"},
      {"\"198.51.100.256\"", "not a valid IP address"},
      {"\"1.2.3\"", "not a valid IP address"},
      {"\"1.2.3.4.5\"", "not a valid IP address"},
      {"\"example.123\"", "last label is numeric"},
      {"\"2001:db8::g\"", "IPv6"},
      {"\"2001:db8::1:443\"", "ambiguous: write [ADDR]:PORT"},
      {"\"fe80::1:22\"", "ambiguous"},
      {"\"2001:db8::/129\"", "IPv6"},
      {"\"[2001:db8::1]:\"", "1 to 65535"},
      {"\"[2001:db8::1]x\"", "only \":PORT\""},
      {"\"[2001:db8::1\"", "missing ']'"},
      {"\"[198.51.100.7]:80\"", "IPv6"},
      {"\"http://pypi.org\"", "not a URL"},
      {"\"pypi.org/simple\"", "without a path"},
      {"42", "must be a string"},
      {"null", "must be a string"},
      {"[\"pypi.org\"]", "must be a string"},
  };
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    /* The bad entry is the third: the field must name index 2. */
    char txt[800];
    snprintf(txt, sizeof txt,
             "{\"egress\":\"allowlist\",\"allow\":[\"pypi.org\",\"198.51.100.0/24\",%s]}",
             b[i].entry);
    struct sbx_error err = parse_err(txt);
    CHECK(err.code == SBX_E_INVALID);
    CHECK_STR(err.field, "network.allow[2]");
    CHECK(err.msg_fr[0] != '\0');
    if (!strstr(err.msg, b[i].msg)) {
      CHECK(!"message");
      fprintf(stderr, "  entry %s: message \"%s\" lacks \"%s\"\n", b[i].entry, err.msg,
              b[i].msg);
    }
  }
}

static void test_policy_object(void)
{
  static const struct {
    const char *json, *field;
  } b[] = {
      {"\"none\"", "network"},
      {"[]", "network"},
      {"{\"egress\":\"all\"}", "network.egress"},
      {"{\"egress\":\"\"}", "network.egress"},
      {"{\"egress\":1}", "network.egress"},
      {"{\"egress\":\"allowlist\",\"deny\":[]}", "network.deny"},
      {"{\"egress\":\"none\",\"allow\":[\"pypi.org\"]}", "network.allow"},
      {"{\"allow\":[\"pypi.org\"]}", "network.allow"},
      {"{\"egress\":\"allowlist\",\"allow\":\"pypi.org\"}", "network.allow"},
      {"{\"egress\":\"allowlist\",\"allow\":{}}", "network.allow"},
  };
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    struct sbx_error err = parse_err(b[i].json);
    CHECK(err.code == SBX_E_INVALID);
    CHECK_STR(err.field, b[i].field);
  }
  /* Too many entries. */
  json_t *arr = json_array();
  for (int i = 0; i <= SBX_NET_MAX_RULES; i++) {
    char e[32];
    snprintf(e, sizeof e, "h%d.example", i);
    json_array_append_new(arr, json_string(e));
  }
  json_t *net = json_pack("{s:s, s:O}", "egress", "allowlist", "allow", arr);
  struct sbx_net_policy *p = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_net_policy_parse(net, "network", &p, &err) < 0);
  CHECK_STR(err.field, "network.allow");
  json_decref(net);
  json_array_remove(arr, 0); /* exactly the maximum is fine */
  net = json_pack("{s:s, s:O}", "egress", "allowlist", "allow", arr);
  CHECK(sbx_net_policy_parse(net, "network", &p, &err) == 0);
  CHECK(p && p->nrules == SBX_NET_MAX_RULES);
  sbx_net_policy_free(p);
  json_decref(net);
  json_decref(arr);

  /* The field prefix given by the caller is used. */
  err = (struct sbx_error){0};
  net = J("{\"egress\":\"allowlist\",\"allow\":[\"bad\"]}");
  CHECK(sbx_net_policy_parse(net, "network", &p, &err) < 0);
  json_decref(net);

  /* An allowlist must say what it admits, even nothing. */
  err = (struct sbx_error){0};
  net = J("{\"egress\":\"allowlist\"}");
  CHECK(sbx_net_policy_parse(net, "network", &p, &err) < 0);
  CHECK_STR(err.field, "network.allow");
  json_decref(net);

  /* Accepted shapes: null, {}, none, none with an empty list, empty allowlist. */
  const char *ok[] = {"null", "{}", "{\"egress\":\"none\"}",
                      "{\"egress\":\"none\",\"allow\":[]}",
                      "{\"egress\":\"allowlist\",\"allow\":[]}"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    json_t *j = J(ok[i]);
    p = NULL;
    CHECK(sbx_net_policy_parse(j, "network", &p, &err) == 0);
    CHECK(p && p->nrules == 0);
    CHECK(p && p->egress == (i < 4 ? SBX_NET_EGRESS_NONE : SBX_NET_EGRESS_ALLOWLIST));
    CHECK(sbx_net_policy_match_name(p, "pypi.org", 0) < 0);
    sbx_net_policy_free(p);
    json_decref(j);
  }
  p = NULL;
  CHECK(sbx_net_policy_parse(NULL, "network", &p, &err) == 0 && p &&
        p->egress == SBX_NET_EGRESS_NONE);
  sbx_net_policy_free(p);
}

static void test_policy_json(void)
{
  struct sbx_net_policy *p =
      allow("[\"PyPI.org\", \"*.pythonhosted.org\", \"[2001:db8::1]:443\"]");
  CHECK(p != NULL);
  json_t *j = sbx_net_policy_json(p);
  char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  CHECK_STR(s, "{\"allow\":[\"PyPI.org\",\"*.pythonhosted.org\",\"[2001:db8::1]:443\"],"
               "\"egress\":\"allowlist\"}");
  /* Round trip: the JSON form parses back to the same rules. */
  struct sbx_net_policy *q = NULL;
  struct sbx_error err = {0};
  CHECK(sbx_net_policy_parse(j, "network", &q, &err) == 0);
  CHECK(q && q->nrules == 3 && memcmp(q->rules, p->rules, 3 * sizeof p->rules[0]) == 0);
  struct sbx_net_policy *d = sbx_net_policy_dup(p);
  CHECK(d && d->nrules == 3 && memcmp(d, p, sizeof *p + 3 * sizeof p->rules[0]) == 0);
  free(s);
  json_decref(j);
  sbx_net_policy_free(q);
  sbx_net_policy_free(d);
  sbx_net_policy_free(p);

  j = sbx_net_policy_json(NULL);
  s = json_dumps(j, JSON_COMPACT);
  CHECK_STR(s, "{\"egress\":\"none\"}");
  free(s);
  json_decref(j);
  CHECK(sbx_net_policy_dup(NULL) == NULL);
}

static void test_policy_match(void)
{
  struct sbx_net_policy *p = allow(
      "[\"pypi.org\", \"*.pythonhosted.org\", \"api.example.com:443\", "
      "\"203.0.113.0/24:8080\", \"198.51.100.7\", \"2001:db8::/32\", \"[2001:db8:1::5]:22\"]");
  CHECK(p != NULL);
  if (!p)
    return;
  CHECK(sbx_net_policy_match_name(p, "pypi.org", 0) == 0);
  CHECK(sbx_net_policy_match_name(p, "PYPI.ORG.", 443) == 0);
  CHECK(sbx_net_policy_match_name(p, "www.pypi.org", 0) == -1);
  CHECK(sbx_net_policy_match_name(p, "pypi.org.evil.test", 0) == -1);
  CHECK(sbx_net_policy_match_name(p, "files.pythonhosted.org", 443) == 1);
  CHECK(sbx_net_policy_match_name(p, "a.b.pythonhosted.org", 0) == 1);
  CHECK(sbx_net_policy_match_name(p, "pythonhosted.org", 0) == -1);
  CHECK(sbx_net_policy_match_name(p, "evilpythonhosted.org", 0) == -1);
  CHECK(sbx_net_policy_match_name(p, "api.example.com", 443) == 2);
  CHECK(sbx_net_policy_match_name(p, "api.example.com", 0) == 2);
  CHECK(sbx_net_policy_match_name(p, "api.example.com", 80) == -1);
  CHECK(sbx_net_policy_match_name(p, "", 0) == -1);
  CHECK(sbx_net_policy_match_name(p, NULL, 0) == -1);
  CHECK(sbx_net_policy_match_name(p, "pypi.org\\.x", 0) == -1);

  uint8_t a[16];
  ip(AF_INET, "203.0.113.77", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 8080) == 3);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 0) == 3);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 80) == -1);
  ip(AF_INET, "203.0.114.1", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 8080) == -1);
  ip(AF_INET, "198.51.100.7", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 1) == 4);
  ip(AF_INET, "198.51.100.8", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 0) == -1);
  ip(AF_INET6, "2001:db8:ffff::1", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET6, a, 5) == 5);
  CHECK(sbx_net_policy_match_addr(p, AF_INET, a, 5) == -1); /* family matters */
  ip(AF_INET6, "2001:db9::1", a);
  CHECK(sbx_net_policy_match_addr(p, AF_INET6, a, 5) == -1);
  sbx_net_policy_free(p);

  /* Egress none matches nothing, whatever it holds. */
  struct sbx_net_policy none = {.egress = SBX_NET_EGRESS_NONE};
  CHECK(sbx_net_policy_match_name(&none, "pypi.org", 0) == -1);
  CHECK(sbx_net_policy_match_addr(NULL, AF_INET, a, 0) == -1);
}

/* ---- always-closed ranges ---------------------------------------------------- */

static void test_closed(void)
{
  static const struct {
    int family;
    const char *addr, *range;
  } t[] = {
      {AF_INET, "127.0.0.1", "loopback"},
      {AF_INET, "127.255.0.9", "loopback"},
      {AF_INET, "0.0.0.0", "unspecified"},
      {AF_INET, "169.254.169.254", "metadata"},
      {AF_INET, "169.254.1.1", "link-local"},
      {AF_INET, "10.1.2.3", "private"},
      {AF_INET, "172.16.0.1", "private"},
      {AF_INET, "172.31.255.255", "private"},
      {AF_INET, "192.168.1.1", "private"},
      {AF_INET, "100.64.0.1", "cgnat"},
      {AF_INET, "100.127.255.255", "cgnat"},
      {AF_INET, "224.0.0.251", "multicast"},
      {AF_INET, "255.255.255.255", "broadcast"},
      {AF_INET, "240.0.0.1", "reserved"},
      {AF_INET, "198.51.100.7", NULL},
      {AF_INET, "203.0.113.9", NULL},
      {AF_INET, "172.32.0.1", NULL},
      {AF_INET, "100.128.0.1", NULL},
      {AF_INET, "8.8.8.8", NULL},
      {AF_INET6, "::1", "loopback"},
      {AF_INET6, "::", "unspecified"},
      {AF_INET6, "fe80::1", "link-local"},
      {AF_INET6, "fd00::1", "private"},
      {AF_INET6, "fc00::1", "private"},
      {AF_INET6, "ff02::1", "multicast"},
      {AF_INET6, "fd00:ec2::254", "metadata"},
      {AF_INET6, "::ffff:127.0.0.1", "loopback"},
      {AF_INET6, "::ffff:10.0.0.1", "private"},
      {AF_INET6, "::ffff:198.51.100.7", "v4-mapped"},
      {AF_INET6, "64:ff9b::a9fe:a9fe", "metadata"},
      {AF_INET6, "64:ff9b::c633:6407", "nat64"},
      {AF_INET6, "2002:c0a8:0101::1", "private"},
      {AF_INET6, "2001:db8:ffff::1", NULL},
      {AF_INET6, "2606:4700::1111", NULL},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    uint8_t a[16];
    ip(t[i].family, t[i].addr, a);
    const char *got = sbx_net_addr_closed(t[i].family, a);
    if (t[i].range)
      CHECK_STR(got, t[i].range);
    else
      CHECK(got == NULL);
    if ((t[i].range == NULL) != (got == NULL) || (got && strcmp(got, t[i].range) != 0))
      fprintf(stderr, "  %s → %s\n", t[i].addr, got ? got : "(open)");
  }
  /* Every address of the host is closed, with a /32 or /128 prefix. */
  struct ifaddrs *ifa;
  CHECK(getifaddrs(&ifa) == 0);
  int seen = 0;
  for (struct ifaddrs *x = ifa; x; x = x->ifa_next) {
    if (!x->ifa_addr ||
        (x->ifa_addr->sa_family != AF_INET && x->ifa_addr->sa_family != AF_INET6))
      continue;
    int fam = x->ifa_addr->sa_family;
    const void *a = fam == AF_INET ? (void *)&((struct sockaddr_in *)x->ifa_addr)->sin_addr
                                   : (void *)&((struct sockaddr_in6 *)x->ifa_addr)->sin6_addr;
    unsigned prefix = 0;
    CHECK(sbx_net_addr_closed_prefix(fam, a, &prefix) != NULL);
    CHECK(prefix == (fam == AF_INET ? 32u : 128u));
    seen++;
  }
  freeifaddrs(ifa);
  CHECK(seen > 0);

  /* The pools: defaults, then configured ones. */
  uint8_t a[16];
  ip(AF_INET, "10.231.4.5", a);
  unsigned prefix;
  CHECK_STR(sbx_net_addr_closed_prefix(AF_INET, a, &prefix), "private");
  CHECK(prefix == 16);
  struct sbx_error err = {0};
  CHECK(sbx_net_addr_set_pools("198.18.0.0/24", "2001:db8:5::/64", &err) == 0);
  ip(AF_INET6, "2001:db8:5::9", a);
  CHECK_STR(sbx_net_addr_closed_prefix(AF_INET6, a, &prefix), "pool");
  CHECK(prefix == 64);
  CHECK(sbx_net_addr_set_pools("2001:db8::/32", NULL, &err) < 0);
  CHECK(sbx_net_addr_set_pools("junk", NULL, &err) < 0);
  CHECK(sbx_net_addr_set_pools(NULL, "10.0.0.0/8", &err) < 0);
  CHECK(sbx_net_addr_set_pools("10.231.0.0/16", "fd5b:d0c5:a11d::/48", &err) == 0);
  ip(AF_INET6, "2001:db8:5::9", a);
  CHECK(sbx_net_addr_closed(AF_INET6, a) == NULL);

  /* Explicit naming: a CIDR rule opens a closed address only when it is no
   * wider than the closed range. */
  struct sbx_net_policy *p = allow(
      "[\"0.0.0.0/0\", \"10.0.0.0/7\", \"::/0\", \"10.9.0.0/16:5432\", \"169.254.169.254\"]");
  ip(AF_INET, "10.1.2.3", a);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 0) == -1);
  ip(AF_INET, "10.9.1.1", a);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 5432) == 3);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 0) == 3);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 22) == -1);
  ip(AF_INET, "169.254.169.254", a);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 80) == 4);
  ip(AF_INET, "127.0.0.1", a); /* also a host address: only 127.0.0.1 itself opens it */
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 0) == -1);
  ip(AF_INET6, "::1", a);
  CHECK(sbx_net_policy_match_closed(p, AF_INET6, a, 0) == -1);
  ip(AF_INET, "198.51.100.250", a); /* public, on no test host: any rule containing it */
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 0) == 0);
  sbx_net_policy_free(p);
  p = allow("[\"127.0.0.1\"]");
  ip(AF_INET, "127.0.0.1", a);
  CHECK(sbx_net_policy_match_closed(p, AF_INET, a, 0) == 0);
  sbx_net_policy_free(p);
}

/* ---- registry ------------------------------------------------------------------ */

static struct sbx_net_peer mkpeer(const char *id, const char *v4, const char *v6)
{
  struct sbx_net_peer peer;
  memset(&peer, 0, sizeof peer);
  snprintf(peer.sandbox_id, sizeof peer.sandbox_id, "%s", id);
  snprintf(peer.tenant, sizeof peer.tenant, "tenant-%s", id);
  if (v4)
    inet_pton(AF_INET, v4, &peer.addr4);
  if (v6)
    inet_pton(AF_INET6, v6, &peer.addr6);
  return peer;
}

static void *registry_churn(void *arg)
{
  long k = (long)arg;
  struct sbx_net_policy *pol = allow("[\"pypi.org\"]");
  char id[32], v4[32];
  snprintf(id, sizeof id, "churn-%ld", k);
  snprintf(v4, sizeof v4, "10.231.9.%ld", k + 1);
  struct sbx_net_peer peer = mkpeer(id, v4, NULL);
  for (int i = 0; i < 2000; i++) {
    CHECK(sbx_net_registry_put(&peer, pol) == 0);
    struct sbx_net_peer got;
    struct sbx_net_policy *gp = NULL;
    CHECK(sbx_net_registry_find(AF_INET, &peer.addr4, &got, &gp) == 0);
    CHECK(gp && gp->nrules == 1 && strcmp(got.sandbox_id, id) == 0);
    sbx_net_policy_free(gp);
    sbx_net_registry_remove(id);
  }
  sbx_net_policy_free(pol);
  return NULL;
}

static void test_registry(void)
{
  struct sbx_net_policy *p1 = allow("[\"pypi.org\"]");
  struct sbx_net_policy *p2 = allow("[\"pypi.org\", \"*.example.org\"]");
  struct sbx_net_peer a = mkpeer("sess-a", "10.231.0.2", "fd5b:d0c5:a11d::2");
  struct sbx_net_peer b = mkpeer("sess-b", "10.231.0.6", "fd5b:d0c5:a11d::6");
  unsigned base = sbx_net_registry_count();
  CHECK(sbx_net_registry_put(&a, p1) == 0);
  CHECK(sbx_net_registry_put(&b, p1) == 0);
  CHECK(sbx_net_registry_count() == base + 2);

  struct sbx_net_peer got;
  struct sbx_net_policy *gp = NULL;
  CHECK(sbx_net_registry_find(AF_INET, &b.addr4, &got, &gp) == 0);
  CHECK_STR(got.sandbox_id, "sess-b");
  CHECK_STR(got.tenant, "tenant-sess-b");
  CHECK(gp && gp->nrules == 1);
  sbx_net_policy_free(gp);
  CHECK(sbx_net_registry_find(AF_INET6, &a.addr6, &got, &gp) == 0);
  CHECK_STR(got.sandbox_id, "sess-a");
  sbx_net_policy_free(gp);
  uint8_t mapped[16];
  ip(AF_INET6, "::ffff:10.231.0.6", mapped);
  CHECK(sbx_net_registry_find(AF_INET6, mapped, &got, &gp) == 0);
  CHECK_STR(got.sandbox_id, "sess-b");
  sbx_net_policy_free(gp);
  uint8_t other[16];
  ip(AF_INET, "10.231.0.3", other);
  CHECK(sbx_net_registry_find(AF_INET, other, &got, &gp) == -1 && gp == NULL);
  memset(other, 0, sizeof other); /* a peer without v6 never matches :: */
  struct sbx_net_peer c = mkpeer("sess-c", "10.231.0.10", NULL);
  CHECK(sbx_net_registry_put(&c, p1) == 0);
  CHECK(sbx_net_registry_find(AF_INET6, other, NULL, NULL) == -1);
  CHECK(sbx_net_registry_find(AF_INET, other, NULL, NULL) == -1);

  /* Replacing the policy (a PATCH): the copy handed out before is intact,
   * the next lookup sees the new one; the registry kept its own copy. */
  struct sbx_net_policy *before = NULL;
  CHECK(sbx_net_registry_find(AF_INET, &a.addr4, NULL, &before) == 0);
  CHECK(sbx_net_registry_put(&a, p2) == 0);
  sbx_net_policy_free(p2);
  CHECK(before && before->nrules == 1);
  CHECK(sbx_net_registry_find(AF_INET, &a.addr4, NULL, &gp) == 0);
  CHECK(gp && gp->nrules == 2 && sbx_net_policy_match_name(gp, "x.example.org", 0) == 1);
  sbx_net_policy_free(gp);
  sbx_net_policy_free(before);
  CHECK(sbx_net_registry_count() == base + 3);

  sbx_net_registry_remove("sess-a");
  sbx_net_registry_remove("sess-a");
  sbx_net_registry_remove("sess-c");
  CHECK(sbx_net_registry_find(AF_INET, &a.addr4, NULL, NULL) == -1);
  CHECK(sbx_net_registry_find(AF_INET, &b.addr4, NULL, NULL) == 0);
  sbx_net_registry_remove("sess-b");
  CHECK(sbx_net_registry_count() == base);
  sbx_net_policy_free(p1);

  pthread_t th[4];
  for (long i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, registry_churn, (void *)i);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  CHECK(sbx_net_registry_count() == base);
}

/* ---- a real upstream resolver on loopback ----------------------------------- */

struct upstream {
  int family;
  int udp, tcp, stop[2];
  uint16_t port;
  pthread_t th;
  int queries; /* how many it answered */
  int tcp_queries;
};

static size_t put_name(uint8_t *o, const char *name)
{
  size_t n = 0;
  while (*name) {
    const char *dot = strchr(name, '.');
    size_t l = dot ? (size_t)(dot - name) : strlen(name);
    o[n++] = (uint8_t)l;
    memcpy(o + n, name, l);
    n += l;
    name += l + (dot ? 1 : 0);
  }
  o[n++] = 0;
  return n;
}

static size_t put_rr(uint8_t *r, size_t len, const uint8_t *owner, size_t olen, unsigned type,
                     unsigned ttl, const void *rd, size_t rdlen)
{
  memcpy(r + len, owner, olen);
  len += olen;
  uint8_t h[10] = {(uint8_t)(type >> 8),
                   (uint8_t)type,
                   0,
                   1,
                   (uint8_t)(ttl >> 24),
                   (uint8_t)(ttl >> 16),
                   (uint8_t)(ttl >> 8),
                   (uint8_t)ttl,
                   (uint8_t)(rdlen >> 8),
                   (uint8_t)rdlen};
  memcpy(r + len, h, 10);
  memcpy(r + len + 10, rd, rdlen);
  r[7]++;
  return len + 10 + rdlen;
}

/* The behaviour of the test upstream, by name. */
static size_t upstream_answer(const uint8_t *q, size_t qlen, bool tcp, uint8_t *r)
{
  char name[NS_MAXDNAME];
  int l = dn_expand(q, q + qlen, q + 12, name, sizeof name);
  if (l < 0 || qlen < 12 + (size_t)l + 4)
    return 0;
  unsigned qtype = (unsigned)q[12 + l] << 8 | q[13 + l];
  size_t len = 12 + (size_t)l + 4;
  memcpy(r, q, len);
  r[2] = 0x81;
  r[3] = 0x80;
  const uint8_t self[2] = {0xc0, 0x0c};
  uint8_t a[16];
  if (strcmp(name, "cname.up.test") == 0) {
    uint8_t target[64];
    size_t tl = put_name(target, "Target.UP.test");
    len = put_rr(r, len, self, 2, ns_t_cname, 200, target, tl);
    if (qtype == ns_t_a) {
      ip(AF_INET, "198.51.100.20", a);
      len = put_rr(r, len, target, tl, ns_t_a, 100, a, 4);
      ip(AF_INET, "198.51.100.99", a); /* not on the chain: ignored */
      uint8_t other[64];
      size_t ol = put_name(other, "other.up.test");
      len = put_rr(r, len, other, ol, ns_t_a, 100, a, 4);
    } else if (qtype == ns_t_aaaa) {
      ip(AF_INET6, "2001:db8::20", a);
      len = put_rr(r, len, target, tl, ns_t_aaaa, 150, a, 16);
    }
  } else if (strcmp(name, "big.up.test") == 0) {
    if (!tcp) {
      r[2] |= 0x02; /* TC: come back over TCP */
      return len;
    }
    for (int i = 1; i <= 3 && qtype == ns_t_a; i++) {
      char s[32];
      snprintf(s, sizeof s, "203.0.113.%d", i);
      ip(AF_INET, s, a);
      len = put_rr(r, len, self, 2, ns_t_a, 100000, a, 4);
    }
  } else if (strcmp(name, "nx.up.test") == 0) {
    r[3] |= ns_r_nxdomain;
  } else if (strcmp(name, "fail.up.test") == 0) {
    r[3] |= ns_r_servfail;
  } else if (strcmp(name, "short.up.test") == 0 && qtype == ns_t_a) {
    ip(AF_INET, "198.51.100.30", a);
    len = put_rr(r, len, self, 2, ns_t_a, 1, a, 4);
  } else if (strcmp(name, "rebind.up.test") == 0 && qtype == ns_t_a) {
    ip(AF_INET, "127.0.0.1", a);
    len = put_rr(r, len, self, 2, ns_t_a, 30, a, 4);
  } else if (strcmp(name, "bad.up.test") == 0) {
    len = put_rr(r, len, self, 2, ns_t_a, 30, "\x01\x02", 2); /* rdlength 2 for an A */
    r[7] = 50;                                                /* and a lying count */
  }
  return len;
}

static void *upstream_main(void *arg)
{
  struct upstream *u = arg;
  for (;;) {
    struct pollfd p[3] = {{.fd = u->stop[0], .events = POLLIN},
                          {.fd = u->udp, .events = POLLIN},
                          {.fd = u->tcp, .events = POLLIN}};
    if (poll(p, 3, -1) < 0 || p[0].revents)
      return NULL;
    uint8_t q[1024], r[1024];
    if (p[1].revents) {
      struct sockaddr_storage from;
      socklen_t fl = sizeof from;
      ssize_t n = recvfrom(u->udp, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
      if (n < 12)
        continue;
      char name[NS_MAXDNAME];
      if (dn_expand(q, q + n, q + 12, name, sizeof name) > 0 &&
          strcmp(name, "spoof.up.test") == 0) {
        /* A forged reply first (wrong ID), then the real one. */
        size_t rl = upstream_answer(q, (size_t)n, false, r);
        uint8_t a[16];
        ip(AF_INET, "10.6.6.6", a);
        uint8_t self[2] = {0xc0, 0x0c};
        size_t fl2 = put_rr(r, rl, self, 2, ns_t_a, 30, a, 4);
        r[0] ^= 0x55;
        sendto(u->udp, r, fl2, 0, (struct sockaddr *)&from, fl);
        r[0] ^= 0x55;
        r[7] = 0;
        if (q[12 + strlen("spoof.up.test") + 2 + 1] == ns_t_a) {
          ip(AF_INET, "198.51.100.40", a);
          rl = put_rr(r, rl, self, 2, ns_t_a, 30, a, 4);
        }
        sendto(u->udp, r, rl, 0, (struct sockaddr *)&from, fl);
        __atomic_add_fetch(&u->queries, 1, __ATOMIC_SEQ_CST);
        continue;
      }
      size_t rl = upstream_answer(q, (size_t)n, false, r);
      __atomic_add_fetch(&u->queries, 1, __ATOMIC_SEQ_CST);
      if (rl)
        sendto(u->udp, r, rl, 0, (struct sockaddr *)&from, fl);
    }
    if (p[2].revents) {
      int c = accept(u->tcp, NULL, NULL);
      if (c < 0)
        continue;
      uint8_t lb[2];
      if (recv(c, lb, 2, MSG_WAITALL) == 2) {
        size_t ql = (size_t)lb[0] << 8 | lb[1];
        if (ql <= sizeof q && recv(c, q, ql, MSG_WAITALL) == (ssize_t)ql) {
          size_t rl = upstream_answer(q, ql, true, r + 2);
          r[0] = (uint8_t)(rl >> 8);
          r[1] = (uint8_t)rl;
          send(c, r, rl + 2, MSG_NOSIGNAL);
          __atomic_add_fetch(&u->tcp_queries, 1, __ATOMIC_SEQ_CST);
        }
      }
      close(c);
    }
  }
}

static int upstream_start(struct upstream *u, int family)
{
  memset(u, 0, sizeof *u);
  u->family = family;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t sl;
  if (family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sl = sizeof *s4;
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_loopback;
    sl = sizeof *s6;
  }
  u->udp = socket(family, SOCK_DGRAM, 0);
  if (u->udp < 0 || bind(u->udp, (struct sockaddr *)&ss, sl) < 0)
    return -1;
  getsockname(u->udp, (struct sockaddr *)&ss, &sl);
  u->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  u->tcp = socket(family, SOCK_STREAM, 0);
  if (u->tcp < 0 || bind(u->tcp, (struct sockaddr *)&ss, sl) < 0 || listen(u->tcp, 8) < 0)
    return -1;
  if (pipe(u->stop) < 0)
    return -1;
  return pthread_create(&u->th, NULL, upstream_main, u) == 0 ? 0 : -1;
}

static void upstream_stop(struct upstream *u)
{
  if (write(u->stop[1], "x", 1) != 1)
    return;
  pthread_join(u->th, NULL);
  close(u->udp);
  close(u->tcp);
  close(u->stop[0]);
  close(u->stop[1]);
}

/* ---- resolve -------------------------------------------------------------------- */

static int resolve_strs(const char *name, char out[][INET6_ADDRSTRLEN], int max, unsigned *ttl)
{
  struct sockaddr_storage ss[16];
  int n = sbx_net_resolve_ttl(name, ss, max < 16 ? max : 16, ttl);
  for (int i = 0; i < n; i++) {
    if (ss[i].ss_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)&ss[i])->sin_addr, out[i], INET6_ADDRSTRLEN);
    else
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss[i])->sin6_addr, out[i], INET6_ADDRSTRLEN);
  }
  return n;
}

static void test_resolve_config(void)
{
  const char *bad_pins[][2] = {{"noequals", NULL},      {"single=198.51.100.1", NULL},
                               {"a.test=", NULL},       {"a.test=not-an-ip", NULL},
                               {"=198.51.100.1", NULL}, {"a_b.test=1.2.3.4", NULL}};
  for (size_t i = 0; i < sizeof bad_pins / sizeof bad_pins[0]; i++) {
    struct sbx_error err = {0};
    CHECK(sbx_net_resolve_configure(bad_pins[i], NULL, &err) < 0);
    CHECK(err.code == SBX_E_INVALID && strstr(err.msg, "--resolve"));
  }
  const char *bad_up[] = {"1.2.3.4:0", "1.2.3.4:99999", "[::1",        "[::1]x",
                          "foo",       "1.2.3.4:",      "1.2.3.4:+53", "[::1]:53:1"};
  for (size_t i = 0; i < sizeof bad_up / sizeof bad_up[0]; i++) {
    struct sbx_error err = {0};
    CHECK(sbx_net_resolve_configure(NULL, bad_up[i], &err) < 0);
    if (!strstr(err.msg, "--dns-upstream"))
      fprintf(stderr, "  upstream %s accepted\n", bad_up[i]);
  }
  const char *good_up[] = {"198.51.100.53", "198.51.100.53:5353", "2001:db8::53",
                           "[2001:db8::53]", "[2001:db8::53]:5353"};
  for (size_t i = 0; i < sizeof good_up / sizeof good_up[0]; i++) {
    struct sbx_error err = {0};
    CHECK(sbx_net_resolve_configure(NULL, good_up[i], &err) == 0);
  }

  const char *pins[] = {"pinned.test=198.51.100.7", "Pinned.Test.=2001:db8::7",
                        "v6only.test=[2001:db8::8]", NULL};
  struct sbx_error err = {0};
  CHECK(sbx_net_resolve_configure(pins, NULL, &err) == 0);
  char out[16][INET6_ADDRSTRLEN];
  unsigned ttl = 0;
  CHECK(resolve_strs("pinned.test", out, 16, &ttl) == 2);
  CHECK_STR(out[0], "198.51.100.7");
  CHECK_STR(out[1], "2001:db8::7");
  CHECK(ttl == 60);
  CHECK(resolve_strs("PINNED.test.", out, 1, NULL) == 1); /* max respected */
  CHECK(resolve_strs("v6only.test", out, 16, NULL) == 1);
  CHECK_STR(out[0], "2001:db8::8");
  CHECK(resolve_strs("other.test", out, 16, &ttl) == 0); /* no upstream: nothing else */
  CHECK(resolve_strs("not a name", out, 16, NULL) == 0);
  CHECK(sbx_net_resolve("pinned.test", (struct sockaddr_storage[4]){0}, 4) == 2);
}

static void test_resolve_upstream(int family)
{
  struct upstream u;
  if (upstream_start(&u, family) < 0) {
    fprintf(stderr, "no %s loopback: skipping that upstream\n", family == AF_INET ? "v4" : "v6");
    return;
  }
  char up[64];
  snprintf(up, sizeof up, family == AF_INET ? "127.0.0.1:%u" : "[::1]:%u", u.port);
  const char *pins[] = {"pinned.test=198.51.100.7", NULL};
  struct sbx_error err = {0};
  CHECK(sbx_net_resolve_configure(pins, up, &err) == 0);
  char out[16][INET6_ADDRSTRLEN];
  unsigned ttl = 0;

  /* Pins win and never ask upstream. */
  CHECK(resolve_strs("pinned.test", out, 16, &ttl) == 1);
  CHECK(u.queries == 0);

  /* A CNAME chain, both families, records off the chain ignored. */
  CHECK(resolve_strs("cname.up.test", out, 16, &ttl) == 2);
  CHECK_STR(out[0], "198.51.100.20");
  CHECK_STR(out[1], "2001:db8::20");
  CHECK(ttl == 100);
  int q = u.queries;
  CHECK(q == 2);
  CHECK(resolve_strs("CNAME.up.test.", out, 16, &ttl) == 2); /* cached */
  CHECK(u.queries == q);
  CHECK(ttl <= 100 && ttl >= 98);

  /* Truncated over UDP → the same question over TCP; TTL capped. */
  CHECK(resolve_strs("big.up.test", out, 16, &ttl) == 3);
  CHECK_STR(out[2], "203.0.113.3");
  CHECK(u.tcp_queries >= 1);
  CHECK(ttl == 300);

  CHECK(resolve_strs("nx.up.test", out, 16, &ttl) == 0);
  CHECK(resolve_strs("fail.up.test", out, 16, &ttl) == -1);
  q = u.queries;
  CHECK(resolve_strs("fail.up.test", out, 16, &ttl) == -1); /* failures are not cached */
  CHECK(u.queries > q);
  CHECK(resolve_strs("short.up.test", out, 16, &ttl) == 1);
  CHECK(ttl == 5); /* the floor */
  CHECK(resolve_strs("bad.up.test", out, 16, &ttl) == -1);
  /* The forged reply (wrong ID) is ignored. */
  CHECK(resolve_strs("spoof.up.test", out, 16, &ttl) == 1);
  CHECK_STR(out[0], "198.51.100.40");

  upstream_stop(&u);
  /* Upstream gone: its port refuses at once, a failure, not "no such name". */
  CHECK(resolve_strs("gone.up.test", out, 16, &ttl) == -1);
  CHECK(resolve_strs("cname.up.test", out, 16, &ttl) == 2); /* still cached */
  CHECK(sbx_net_resolve_configure(NULL, NULL, &err) == 0);
}

/* ---- the DNS responder, end to end ------------------------------------------- */

struct reply {
  int rcode;
  int n;
  char addr[16][INET6_ADDRSTRLEN];
  unsigned ttl;
  int qdcount;
};

static int bind_from(int family, int type, const char *src)
{
  int fd = socket(family, type, 0);
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    inet_pton(AF_INET, src, &s4->sin_addr);
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, src, &s6->sin6_addr);
  }
  if (fd >= 0 &&
      bind(fd, (struct sockaddr *)&ss,
           family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void dest(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl)
{
  memset(ss, 0, sizeof *ss);
  if (family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *sl = sizeof *s4;
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    s6->sin6_addr = in6addr_loopback;
    *sl = sizeof *s6;
  }
}

/* Sends a raw packet over UDP from src; returns the reply length (0: none in 2 s). */
static ssize_t udp_raw(int family, const char *src, uint16_t port, const void *pkt, size_t len,
                       uint8_t *resp, size_t cap)
{
  int fd = bind_from(family, SOCK_DGRAM, src);
  if (fd < 0)
    return -1;
  struct sockaddr_storage ss;
  socklen_t sl;
  dest(family, port, &ss, &sl);
  sendto(fd, pkt, len, 0, (struct sockaddr *)&ss, sl);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  ssize_t n = 0;
  if (poll(&p, 1, 2000) == 1)
    n = recv(fd, resp, cap, 0);
  close(fd);
  return n;
}

static ssize_t tcp_raw(int family, uint16_t port, const void *pkt, size_t len, uint8_t *resp,
                       size_t cap)
{
  int fd = socket(family, SOCK_STREAM, 0);
  struct sockaddr_storage ss;
  socklen_t sl;
  dest(family, port, &ss, &sl);
  if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sl) < 0)
    return -1;
  uint8_t buf[2 + 1024];
  buf[0] = (uint8_t)(len >> 8);
  buf[1] = (uint8_t)len;
  memcpy(buf + 2, pkt, len);
  send(fd, buf, len + 2, MSG_NOSIGNAL);
  uint8_t lb[2];
  ssize_t n = 0;
  struct timeval tv = {.tv_sec = 3};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (recv(fd, lb, 2, MSG_WAITALL) == 2) {
    size_t rl = (size_t)lb[0] << 8 | lb[1];
    n = rl <= cap && recv(fd, resp, rl, MSG_WAITALL) == (ssize_t)rl ? (ssize_t)rl : -1;
  }
  close(fd);
  return n;
}

static void parse_resp(const uint8_t *resp, ssize_t n, struct reply *out)
{
  memset(out, 0, sizeof *out);
  out->rcode = -1;
  ns_msg msg;
  if (n <= 0 || ns_initparse(resp, (int)n, &msg) < 0)
    return;
  out->rcode = ns_msg_getflag(msg, ns_f_rcode);
  out->qdcount = ns_msg_count(msg, ns_s_qd);
  for (int i = 0; i < ns_msg_count(msg, ns_s_an) && out->n < 16; i++) {
    ns_rr rr;
    if (ns_parserr(&msg, ns_s_an, i, &rr) < 0)
      break;
    int fam = ns_rr_type(rr) == ns_t_a ? AF_INET : AF_INET6;
    inet_ntop(fam, ns_rr_rdata(rr), out->addr[out->n++], INET6_ADDRSTRLEN);
    out->ttl = ns_rr_ttl(rr);
  }
}

/* A real query (res_mkquery) over UDP or TCP from src; parsed with libresolv. */
static void query(bool tcp, int family, const char *src, uint16_t port, const char *name,
                  int qtype, struct reply *out)
{
  uint8_t q[512], resp[1024];
  int qlen = res_mkquery(ns_o_query, name, ns_c_in, qtype, NULL, 0, NULL, q, sizeof q);
  ssize_t n = -1;
  if (qlen > 0)
    n = tcp ? tcp_raw(family, port, q, (size_t)qlen, resp, sizeof resp)
            : udp_raw(family, src, port, q, (size_t)qlen, resp, sizeof resp);
  parse_resp(resp, n, out);
  if (n > 0 && (resp[0] != q[0] || resp[1] != q[1]))
    out->rcode = -2; /* wrong ID */
}

static bool learned_has(const char *addr, uint16_t port)
{
  uint8_t a[16] = {0};
  int fam = strchr(addr, ':') ? AF_INET6 : AF_INET;
  inet_pton(fam, addr, a);
  bool found = false;
  pthread_mutex_lock(&seam_mu);
  for (int i = 0; i < nlearned && !found; i++)
    found = learned[i].family == fam &&
            memcmp(learned[i].addr, a, fam == AF_INET ? 4 : 16) == 0 &&
            learned[i].port == port && learned[i].ttl > 30 && learned[i].ttl <= 90 &&
            strcmp(learned[i].sandbox, "sess-dns") == 0;
  pthread_mutex_unlock(&seam_mu);
  return found;
}

static void test_dns_hostile(uint16_t port)
{
  uint8_t resp[1024];
  struct reply r;
  /* Name is a compression pointer to itself. */
  uint8_t loop[] = {0x12, 0x34, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, loop, sizeof loop, resp, sizeof resp),
             &r);
  CHECK(r.rcode == ns_r_formerr && r.n == 0);
  /* Two labels pointing at each other. */
  uint8_t loop2[] = {0x12, 0x35, 0x01, 0,    0, 1,   0,    0,    0, 0, 0, 0,
                     1,    'a',  0xc0, 0x10, 1, 'b', 0xc0, 0x0c, 0, 1, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, loop2, sizeof loop2, resp, sizeof resp),
             &r);
  CHECK(r.rcode == ns_r_formerr);
  /* Pointer beyond the end; label running past the end; no question bytes. */
  uint8_t oob[] = {0, 1, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc3, 0xff, 0, 1, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, oob, sizeof oob, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_formerr);
  uint8_t run[] = {0, 2, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 60, 'a', 'b'};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, run, sizeof run, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_formerr);
  uint8_t noq[] = {0, 3, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, noq, sizeof noq, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_formerr);
  /* Two questions; an answer section in a query; an opcode we do not do. */
  uint8_t q2[] = {0, 4, 0x01, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, q2, sizeof q2, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_formerr);
  uint8_t upd[] = {0, 5, 0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, upd, sizeof upd, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_notimpl);
  /* A response is never answered (no reflection loops); runts neither. */
  uint8_t rsp[] = {0, 6, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
  CHECK(udp_raw(AF_INET, "127.0.0.1", port, rsp, sizeof rsp, resp, sizeof resp) == 0);
  CHECK(udp_raw(AF_INET, "127.0.0.1", port, "\x01", 1, resp, sizeof resp) == 0);
  /* Names with a dot or a NUL inside a label, or the root: refused. */
  uint8_t dot[] = {0,   7,   0x01, 0,   0,   1,   0,   0,   0,   0, 0, 0, 10, 'p',
                   'i', 'n', 'n',  'e', 'd', '.', 't', 'e', 's', 0, 0, 1, 0,  1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, dot, sizeof dot, resp, sizeof resp), &r);
  CHECK(r.rcode == ns_r_refused && r.n == 0);
  uint8_t root[] = {0, 8, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1};
  parse_resp(resp, udp_raw(AF_INET, "127.0.0.1", port, root, sizeof root, resp, sizeof resp),
             &r);
  CHECK(r.rcode == ns_r_refused);
  /* Oversized datagram (beyond what a query needs). */
  static uint8_t big[4000];
  memcpy(big, noq, sizeof noq);
  CHECK(udp_raw(AF_INET, "127.0.0.1", port, big, sizeof big, resp, sizeof resp) == 0);
  /* Random garbage, many times. */
  srand(5);
  for (int i = 0; i < 2000; i++) {
    uint8_t g[600];
    size_t len = (size_t)(rand() % (int)sizeof g);
    for (size_t k = 0; k < len; k++)
      g[k] = (uint8_t)rand();
    if (len > 2 && (i & 1))
      g[2] &= 0x01; /* a query header, more often parsed further */
    if (len > 5 && (i & 2)) {
      g[4] = 0;
      g[5] = 1;
      memset(g + 6, 0, len > 12 ? 6 : len - 6);
    }
    int fd = bind_from(AF_INET, SOCK_DGRAM, "127.0.0.1");
    struct sockaddr_storage ss;
    socklen_t sl;
    dest(AF_INET, port, &ss, &sl);
    sendto(fd, g, len, 0, (struct sockaddr *)&ss, sl);
    close(fd);
  }
  /* TCP: a length larger than any query, a truncated message, a silent peer. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_storage ss;
  socklen_t sl;
  dest(AF_INET, port, &ss, &sl);
  CHECK(connect(fd, (struct sockaddr *)&ss, sl) == 0);
  CHECK(send(fd, "\xff\xff\x00\x01", 4, MSG_NOSIGNAL) == 4);
  struct timeval tv = {.tv_sec = 3};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  CHECK(recv(fd, resp, sizeof resp, 0) <= 0); /* closed on us (RST: data left unread) */
  close(fd);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(connect(fd, (struct sockaddr *)&ss, sl) == 0);
  CHECK(send(fd, "\x00\x20\x00\x01", 4, MSG_NOSIGNAL) == 4);
  close(fd);
  int idle[20];
  for (int i = 0; i < 20; i++) { /* more than the connection limit */
    idle[i] = socket(AF_INET, SOCK_STREAM, 0);
    connect(idle[i], (struct sockaddr *)&ss, sl);
  }
  for (int i = 0; i < 20; i++)
    close(idle[i]);
  usleep(100 * 1000);
  /* And it still answers. */
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  query(true, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
}

static void test_dns(void)
{
  struct upstream u;
  bool have_up = upstream_start(&u, AF_INET) == 0;
  CHECK(have_up);
  char up[64];
  snprintf(up, sizeof up, "127.0.0.1:%u", have_up ? u.port : 9);
  const char *pins[] = {
      "pinned.test=198.51.100.7", "pinned.test=2001:db8::7", "evil.test=10.0.0.1",
      "loop.test=127.0.0.1",      "a.wild.test=203.0.113.9", "meta.test=169.254.169.254",
      "mixed.test=10.0.0.2",      "mixed.test=198.51.100.8", NULL};
  struct sbx_error err = {0};
  CHECK(sbx_net_resolve_configure(pins, up, &err) == 0);
  res_init();

  uint16_t port = 0;
  CHECK(sbx_net_dns_start(&port, &err) == 0);
  CHECK(port != 0);
  uint16_t port2;
  CHECK(sbx_net_dns_start(&port2, &err) < 0); /* once */

  struct sbx_net_policy *p =
      allow("[\"pinned.test\", \"*.wild.test:443\", \"evil.test\", \"loop.test\", "
            "\"meta.test\", \"mixed.test\", \"cname.up.test\", \"rebind.up.test\", "
            "\"nx.up.test\", \"fail.up.test\"]");
  struct sbx_net_peer peer = mkpeer("sess-dns", "127.0.0.1", NULL);
  CHECK(sbx_net_registry_put(&peer, p) == 0);
  seams_reset();

  struct reply r;
  /* An allowed pinned name: the answer, learned by nft first. */
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1 && r.qdcount == 1);
  CHECK_STR(r.addr[0], "198.51.100.7");
  CHECK(r.ttl >= 1 && r.ttl <= 60);
  CHECK(learned_has("198.51.100.7", 0));
  CHECK(last_decision.allowed && strcmp(last_decision.rule, "pinned.test") == 0);
  CHECK_STR(last_decision.proto, "dns");
  CHECK_STR(last_decision.sandbox, "sess-dns");
  query(false, AF_INET, "127.0.0.1", port, "Pinned.Test", ns_t_aaaa, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  CHECK_STR(r.addr[0], "2001:db8::7");
  CHECK(learned_has("2001:db8::7", 0));
  /* Over TCP too. */
  query(true, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  /* Other types of an allowed name: empty, not refused. */
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_txt, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 0);
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_mx, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 0);

  /* Not in the allowlist: REFUSED, with a decision saying why. */
  seams_reset();
  query(false, AF_INET, "127.0.0.1", port, "unlisted.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused && r.n == 0);
  CHECK(!last_decision.allowed);
  CHECK_STR(last_decision.reason, "not in allowlist");
  CHECK_STR(last_decision.dest, "unlisted.test");
  query(false, AF_INET, "127.0.0.1", port, "wild.test", ns_t_a, &r); /* not below itself */
  CHECK(r.rcode == ns_r_refused);
  query(false, AF_INET, "127.0.0.1", port, "pinned.test.evil", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused);
  query(false, AF_INET, "127.0.0.1", port, "unlisted.test", ns_t_txt, &r);
  CHECK(r.rcode == ns_r_refused);
  CHECK(nlearned == 0);

  /* Wildcard rule with a port: nft learns that port only. */
  query(false, AF_INET, "127.0.0.1", port, "a.wild.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  CHECK(learned_has("203.0.113.9", 443));
  CHECK(!learned_has("203.0.113.9", 0));
  CHECK_STR(last_decision.rule, "*.wild.test:443");

  /* Rebinding: names resolving into closed ranges are refused. */
  seams_reset();
  query(false, AF_INET, "127.0.0.1", port, "evil.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused && r.n == 0);
  CHECK(!last_decision.allowed);
  CHECK_STR(last_decision.reason, "resolves to private");
  query(false, AF_INET, "127.0.0.1", port, "loop.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused);
  CHECK_STR(last_decision.reason, "resolves to loopback");
  query(false, AF_INET, "127.0.0.1", port, "meta.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused);
  CHECK_STR(last_decision.reason, "resolves to metadata");
  query(false, AF_INET, "127.0.0.1", port, "rebind.up.test", ns_t_a, &r); /* via upstream */
  CHECK(r.rcode == ns_r_refused);
  CHECK_STR(last_decision.reason, "resolves to loopback");
  CHECK(nlearned == 0);
  /* A name with one closed and one public address: only the public one. */
  query(false, AF_INET, "127.0.0.1", port, "mixed.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  CHECK_STR(r.addr[0], "198.51.100.8");
  CHECK(nlearned == 1);

  /* Upstream answers: CNAME flattened to the addresses; NXDOMAIN; SERVFAIL. */
  query(false, AF_INET, "127.0.0.1", port, "cname.up.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  CHECK_STR(r.addr[0], "198.51.100.20");
  CHECK(r.ttl <= 60);
  query(false, AF_INET, "127.0.0.1", port, "nx.up.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_nxdomain);
  query(false, AF_INET, "127.0.0.1", port, "fail.up.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_servfail);

  /* nft refusing to learn: the address is not handed out. */
  seams_reset();
  pthread_mutex_lock(&seam_mu);
  learn_fails = true;
  pthread_mutex_unlock(&seam_mu);
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_servfail && r.n == 0);
  CHECK(!last_decision.allowed);
  seams_reset();

  /* A policy that names the closed range explicitly opens it; 0.0.0.0/0
   * does not.  The change applies to the next query (PATCH). */
  struct sbx_net_policy *wide = allow("[\"evil.test\", \"0.0.0.0/0\"]");
  CHECK(sbx_net_registry_put(&peer, wide) == 0);
  query(false, AF_INET, "127.0.0.1", port, "evil.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused);
  struct sbx_net_policy *named = allow("[\"evil.test\", \"10.0.0.0/8\"]");
  CHECK(sbx_net_registry_put(&peer, named) == 0);
  query(false, AF_INET, "127.0.0.1", port, "evil.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  CHECK_STR(r.addr[0], "10.0.0.1");
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r); /* no longer listed */
  CHECK(r.rcode == ns_r_refused);
  /* PATCH to none: everything refused. */
  struct sbx_net_policy *none = NULL;
  CHECK(sbx_net_policy_parse(NULL, "network", &none, &err) == 0);
  CHECK(sbx_net_registry_put(&peer, none) == 0);
  query(false, AF_INET, "127.0.0.1", port, "evil.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused);
  CHECK(sbx_net_registry_put(&peer, p) == 0);

  /* Strangers: another source address gets REFUSED and nothing else. */
  seams_reset();
  query(false, AF_INET, "127.0.0.2", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused && r.n == 0 && r.qdcount == 0);
  query(false, AF_INET6, "::1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_refused || r.rcode == -1); /* -1: no IPv6 here */
  query(true, AF_INET6, "::1", port, "pinned.test", ns_t_aaaa, &r);
  CHECK(r.rcode == ns_r_refused || r.rcode == -1);
  CHECK(ndecisions == 0 && nlearned == 0);
  /* ... and an IPv6 peer is recognised by its v6 address. */
  struct sbx_net_peer peer6 = mkpeer("sess-dns6", NULL, "::1");
  CHECK(sbx_net_registry_put(&peer6, p) == 0);
  query(false, AF_INET6, "::1", port, "pinned.test", ns_t_aaaa, &r);
  CHECK(r.rcode == ns_r_noerror || r.rcode == -1);
  if (r.rcode == ns_r_noerror)
    CHECK_STR(r.addr[0], "2001:db8::7");
  sbx_net_registry_remove("sess-dns6");

  test_dns_hostile(port);

  sbx_net_dns_stop();
  sbx_net_dns_stop(); /* idempotent */
  CHECK(udp_raw(AF_INET, "127.0.0.1", port, "x", 1, (uint8_t[16]){0}, 16) <= 0);
  /* Restartable. */
  CHECK(sbx_net_dns_start(&port, &err) == 0);
  query(false, AF_INET, "127.0.0.1", port, "pinned.test", ns_t_a, &r);
  CHECK(r.rcode == ns_r_noerror && r.n == 1);
  sbx_net_dns_stop();

  sbx_net_registry_remove("sess-dns");
  sbx_net_policy_free(p);
  sbx_net_policy_free(wide);
  sbx_net_policy_free(named);
  sbx_net_policy_free(none);
  if (have_up)
    upstream_stop(&u);
  sbx_net_resolve_configure(NULL, NULL, &err);
}

static void test_resolve_upstream_v4(void) { test_resolve_upstream(AF_INET); }

static void test_resolve_upstream_v6(void) { test_resolve_upstream(AF_INET6); }

int main(void)
{
  CHECK_CASE(test_policy_good);
  CHECK_CASE(test_policy_bad_entries);
  CHECK_CASE(test_policy_object);
  CHECK_CASE(test_policy_json);
  CHECK_CASE(test_policy_match);
  CHECK_CASE(test_closed);
  CHECK_CASE(test_registry);
  CHECK_CASE(test_resolve_config);
  CHECK_CASE(test_resolve_upstream_v4);
  CHECK_CASE(test_resolve_upstream_v6);
  CHECK_CASE(test_dns);
  return check_finish("net");
}
