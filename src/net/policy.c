/* policy.c — the egress policy as a value: strict parsing of a request's
 * `network` object, its JSON form, and matching of names and addresses
 * against its rules.  Pure functions, no state: thread-safe.
 *
 * Every entry is validated here, once, so the enforcement layers (nft.c,
 * dns.c, egress.c) can trust a rule's fields.  A bad entry is a 400 naming
 * "network.allow[N]" and saying what is wrong in English and French, like
 * core/schema.c does for the other fields. */
#include "net/net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_int.h"

/* What is wrong with one entry, in both languages. */
struct why {
  char en[200];
  char fr[200];
};

static int why_set(struct why *w, const char *en, const char *fr)
{
  snprintf(w->en, sizeof w->en, "%s", en);
  snprintf(w->fr, sizeof w->fr, "%s", fr);
  return -1;
}
#define WHY(w, e, f) why_set(w, e, f)

#define bad_type sbx_err_bad_type
#define bad_value sbx_err_bad_value

/* ---- names ------------------------------------------------------------ */

static int name_check(const char *s, size_t n, char *out, size_t outlen, struct why *w)
{
  if (n > 0 && s[n - 1] == '.')
    n--;
  if (n == 0)
    return WHY(w, "empty name", "nom vide");
  if (n > 253 || n >= outlen)
    return WHY(w, "name longer than 253 characters", "nom de plus de 253 caractères");
  size_t labels = 0, start = 0;
  bool numeric = true;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      size_t len = i - start;
      if (len == 0)
        return WHY(w, "empty label in name", "étiquette vide dans le nom");
      if (len > 63)
        return WHY(w, "label longer than 63 characters", "étiquette de plus de 63 caractères");
      if (s[start] == '-' || s[i - 1] == '-')
        return WHY(w, "a label may not begin or end with '-'",
                   "une étiquette ne peut ni commencer ni finir par '-'");
      labels++;
      if (i < n) {
        out[i] = '.';
        numeric = true;
      }
      start = i + 1;
      continue;
    }
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && c != '-')
      return WHY(w, "names may hold only letters, digits, '-' and '.'",
                 "un nom ne peut contenir que lettres, chiffres, '-' et '.'");
    if (!isdigit(c))
      numeric = false;
    out[i] = (char)tolower(c);
  }
  out[n] = '\0';
  if (labels < 2)
    return WHY(w, "a name needs at least two labels (like example.org)",
               "un nom demande au moins deux étiquettes (comme example.org)");
  if (numeric)
    return WHY(w, "not a valid IP address, nor a name (its last label is numeric)",
               "ni une adresse IP valide, ni un nom (sa dernière étiquette est numérique)");
  return 0;
}

int sbx_net_name_normalize(const char *in, char *out, size_t outlen)
{
  struct why w;
  if (!in)
    return -1;
  return name_check(in, strnlen(in, 300), out, outlen, &w);
}

/* ---- one entry ---------------------------------------------------------- */

static int parse_port(const char *s, uint16_t *port, struct why *w)
{
  size_t n = strlen(s);
  unsigned long v = 0;
  bool ok = n >= 1 && n <= 5;
  for (size_t i = 0; ok && i < n; i++) {
    ok = isdigit((unsigned char)s[i]);
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  if (!ok || v < 1 || v > 65535)
    return WHY(w, "the port must be a number from 1 to 65535",
               "le port doit être un nombre de 1 à 65535");
  *port = (uint16_t)v;
  return 0;
}

static int parse_cidr(const char *s, int want_family, struct sbx_net_rule *r, struct why *w)
{
  bool hostbits;
  if (sbx_net_cidr_parse(s, &r->family, r->addr, &r->prefix, &hostbits) < 0 ||
      (want_family && r->family != want_family)) {
    if (want_family == AF_INET6)
      return WHY(w, "not a valid IPv6 address or CIDR (write [ADDR]:PORT for a port)",
                 "ni une adresse ni un CIDR IPv6 valide (écrire [ADRESSE]:PORT pour un port)");
    if (strchr(s, '/'))
      return WHY(w, "not a valid CIDR (like 203.0.113.0/24 or 2001:db8::/32)",
                 "CIDR invalide (comme 203.0.113.0/24 ou 2001:db8::/32)");
    return WHY(w, "not a valid IP address", "adresse IP invalide");
  }
  if (hostbits) {
    char net[INET6_ADDRSTRLEN];
    inet_ntop(r->family, r->addr, net, sizeof net);
    snprintf(w->en, sizeof w->en, "host bits are set after /%u (did you mean %s/%u?)", r->prefix,
             net, r->prefix);
    snprintf(w->fr, sizeof w->fr,
             "des bits d'hôte sont à 1 après /%u (vouliez-vous dire %s/%u ?)", r->prefix, net,
             r->prefix);
    return -1;
  }
  r->kind = SBX_NET_RULE_CIDR;
  return 0;
}

static bool looks_numeric(const char *s)
{
  for (; *s; s++)
    if (!isdigit((unsigned char)*s) && *s != '.' && *s != '/')
      return false;
  return true;
}

/* host (no port) → DOMAIN, WILDCARD or v4 CIDR. */
static int parse_host(const char *h, struct sbx_net_rule *r, struct why *w)
{
  if (strchr(h, '/') && !looks_numeric(h) && !strchr(h, ':'))
    return WHY(w, "write a host name, without a path", "écrire un nom d'hôte, sans chemin");
  if (strchr(h, '/') || looks_numeric(h))
    return parse_cidr(h, AF_INET, r, w);
  if (strncmp(h, "*.", 2) == 0) {
    r->kind = SBX_NET_RULE_WILDCARD;
    if (strchr(h + 2, '*'))
      return WHY(
          w, "'*' may appear only once, as the first label (\"*.example.org\")",
          "'*' ne peut apparaître qu'une fois, en première étiquette (\"*.example.org\")");
    return name_check(h + 2, strlen(h + 2), r->name, sizeof r->name, w);
  }
  if (strchr(h, '*'))
    return WHY(w, "a wildcard must be \"*.\" followed by a name (\"*.example.org\")",
               "un joker s'écrit \"*.\" suivi d'un nom (\"*.example.org\")");
  r->kind = SBX_NET_RULE_DOMAIN;
  return name_check(h, strlen(h), r->name, sizeof r->name, w);
}

/* "2001:db8::1:443" is a valid address, but most likely 2001:db8::1 port
 * 443 written without brackets: refuse what reads both ways (the last
 * group decimal and the rest still an address). */
static bool v6_port_ambiguous(const char *s)
{
  const char *last = strrchr(s, ':');
  size_t n = strlen(last + 1);
  if (strchr(s, '/') || n == 0 || n > 5 || strspn(last + 1, "0123456789") != n)
    return false;
  char head[64];
  uint8_t a[16];
  snprintf(head, sizeof head, "%.*s", (int)(last - s), s);
  return inet_pton(AF_INET6, head, a) == 1;
}

static int parse_entry(const char *s, size_t len, struct sbx_net_rule *r, struct why *w)
{
  memset(r, 0, sizeof *r);
  if (len == 0)
    return WHY(w, "empty entry", "entrée vide");
  if (len >= sizeof r->text)
    return WHY(w, "longer than 299 characters", "plus de 299 caractères");
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
      return WHY(w, "contains a space, a control or a non-ASCII character",
                 "contient une espace, un caractère de contrôle ou non ASCII");
  if (strstr(s, "://"))
    return WHY(w, "write a host name, not a URL", "écrire un nom d'hôte, pas une URL");
  memcpy(r->text, s, len);
  char buf[sizeof r->text];
  memcpy(buf, s, len + 1);

  if (buf[0] == '[') { /* "[v6]" or "[v6/len]", optionally ":port" */
    char *close = strchr(buf, ']');
    if (!close)
      return WHY(w, "missing ']'", "']' manquant");
    *close = '\0';
    if (close[1] == ':') {
      if (parse_port(close + 2, &r->port, w) < 0)
        return -1;
    } else if (close[1]) {
      return WHY(w, "only \":PORT\" may follow ']'", "seul \":PORT\" peut suivre ']'");
    }
    return parse_cidr(buf + 1, AF_INET6, r, w);
  }
  char *colon = strchr(buf, ':');
  if (colon && strchr(colon + 1, ':')) { /* bare IPv6: no port without brackets */
    if (v6_port_ambiguous(buf)) {
      snprintf(w->en, sizeof w->en,
               "ambiguous: write [ADDR]:PORT for a port, or [%s] for this address", buf);
      snprintf(w->fr, sizeof w->fr,
               "ambigu : écrire [ADRESSE]:PORT pour un port, ou [%s] pour cette adresse", buf);
      return -1;
    }
    return parse_cidr(buf, AF_INET6, r, w);
  }
  if (colon) {
    *colon = '\0';
    if (parse_port(colon + 1, &r->port, w) < 0)
      return -1;
  }
  return parse_host(buf, r, w);
}

/* The entry as it may be quoted in a message: bounded and printable. */
static void quote_entry(json_t *v, char *out, size_t outlen)
{
  const char *s = json_string_value(v);
  size_t n = json_string_length(v), j = 0;
  for (size_t i = 0; i < n && j + 4 < outlen; i++)
    out[j++] = (s[i] > 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
  if (n > 0 && j + 4 >= outlen) {
    memcpy(out + j, "...", 3);
    j += 3;
  }
  out[j] = '\0';
}

static int parse_allow(json_t *allow, const char *field, struct sbx_net_policy *p,
                       struct sbx_error *err)
{
  char f[64];
  snprintf(f, sizeof f, "%s.allow", field);
  if (!json_is_array(allow))
    return bad_type(err, f, "an array of strings", "un tableau de chaînes");
  if (json_array_size(allow) > SBX_NET_MAX_RULES) {
    char en[64], fr[64];
    snprintf(en, sizeof en, "at most %d entries", SBX_NET_MAX_RULES);
    snprintf(fr, sizeof fr, "%d entrées au plus", SBX_NET_MAX_RULES);
    return bad_value(err, f, en, fr);
  }
  size_t i;
  json_t *v;
  json_array_foreach(allow, i, v)
  {
    snprintf(f, sizeof f, "%s.allow[%zu]", field, i);
    if (!json_is_string(v))
      return bad_type(err, f, "a string", "une chaîne");
    struct why w;
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (strlen(s) != len) {
      WHY(&w, "contains a NUL byte", "contient un octet NUL");
    } else if (parse_entry(s, len, &p->rules[i], &w) == 0) {
      p->nrules++;
      continue;
    }
    char q[100];
    quote_entry(v, q, sizeof q);
    sbx_err_field(err, f, "%s: \"%s\": %s", f, q, w.en);
    return sbx_err_fr(err, "Requête invalide : %s : \"%s\" : %s", f, q, w.fr);
  }
  return 0;
}

/* network's egress mode ("none" when it names none). */
static int parse_egress(json_t *network, const char *field, enum sbx_net_egress *egress,
                        struct sbx_error *err)
{
  char f[64];
  snprintf(f, sizeof f, "%s.egress", field);
  json_t *eg = json_object_get(network, "egress");
  if (eg && !json_is_string(eg))
    return bad_type(err, f, "a string", "une chaîne");
  const char *e = eg ? json_string_value(eg) : "none";
  if (eg && strlen(e) != json_string_length(eg))
    e = "";
  if (strcmp(e, "allowlist") != 0 && strcmp(e, "none") != 0)
    return bad_value(err, f, "must be \"none\" or \"allowlist\"",
                     "doit être \"none\" ou \"allowlist\"");
  *egress = strcmp(e, "allowlist") == 0 ? SBX_NET_EGRESS_ALLOWLIST : SBX_NET_EGRESS_NONE;
  return 0;
}

/* network's allow list (NULL when it has none), checked to go with egress:
 * only an allowlist has entries, and an allowlist always says them. */
static int allow_for(json_t *network, const char *field, enum sbx_net_egress egress,
                     json_t **allow, struct sbx_error *err)
{
  char f[64];
  snprintf(f, sizeof f, "%s.allow", field);
  *allow = json_object_get(network, "allow");
  if (egress == SBX_NET_EGRESS_NONE && *allow &&
      !(json_is_array(*allow) && json_array_size(*allow) == 0))
    return bad_value(err, f, "an allow list needs egress \"allowlist\"",
                     "une liste d'autorisations demande egress \"allowlist\"");
  /* Say what is admitted, even nothing ("allow": []): a forgotten list is
   * a mistake worth a 400, not a silent "admit nothing". */
  if (egress == SBX_NET_EGRESS_ALLOWLIST && !*allow)
    return bad_value(err, f,
                     "egress \"allowlist\" needs an allow list (\"allow\": [] admits "
                     "nothing)",
                     "egress \"allowlist\" demande une liste allow (\"allow\": [] "
                     "n'autorise rien)");
  return 0;
}

/* The network object's shape: known fields only, its egress mode and the
 * allow list that goes with it (its entries are parse_allow's). */
static int parse_network(json_t *network, const char *field, enum sbx_net_egress *egress,
                         json_t **allow, struct sbx_error *err)
{
  if (!json_is_object(network))
    return bad_type(err, field, "an object", "un objet");
  const char *key;
  json_t *v;
  json_object_foreach(network, key, v)
  {
    if (strcmp(key, "egress") != 0 && strcmp(key, "allow") != 0) {
      char f[64];
      snprintf(f, sizeof f, "%s.%.40s", field, key);
      return bad_value(err, f, "unknown field", "champ inconnu");
    }
  }
  if (parse_egress(network, field, egress, err) < 0)
    return -1;
  return allow_for(network, field, *egress, allow, err);
}

int sbx_net_policy_parse(json_t *network, const char *field, struct sbx_net_policy **out,
                         struct sbx_error *err)
{
  *out = NULL;
  if (!field)
    field = "network";
  json_t *allow = NULL;
  enum sbx_net_egress egress = SBX_NET_EGRESS_NONE;
  if (network && !json_is_null(network) &&
      parse_network(network, field, &egress, &allow, err) < 0)
    return -1;
  size_t n = allow && json_is_array(allow) ? json_array_size(allow) : 0;
  if (n > SBX_NET_MAX_RULES)
    n = 0; /* parse_allow refuses it before touching rules */
  struct sbx_net_policy *p = calloc(1, sizeof *p + n * sizeof p->rules[0]);
  if (!p)
    return sbx_err_sys(err, ENOMEM, "network policy");
  p->egress = egress;
  /* An allowlist without entries is valid and admits nothing: the sandbox
   * gets its link (and DNS that refuses everything) so a later PATCH can
   * open it without recreating the sandbox. */
  if (egress == SBX_NET_EGRESS_ALLOWLIST && allow && parse_allow(allow, field, p, err) < 0) {
    free(p);
    return -1;
  }
  *out = p;
  return 0;
}

json_t *sbx_net_policy_json(const struct sbx_net_policy *p)
{
  if (!p || p->egress == SBX_NET_EGRESS_NONE)
    return json_pack("{s:s}", "egress", "none");
  json_t *allow = json_array();
  for (size_t i = 0; allow && i < p->nrules; i++)
    json_array_append_new(allow, json_string(p->rules[i].text));
  return json_pack("{s:s, s:o*}", "egress", "allowlist", "allow", allow);
}

struct sbx_net_policy *sbx_net_policy_dup(const struct sbx_net_policy *p)
{
  if (!p)
    return NULL;
  size_t sz = sizeof *p + p->nrules * sizeof p->rules[0];
  struct sbx_net_policy *c = malloc(sz);
  if (c)
    memcpy(c, p, sz);
  return c;
}

void sbx_net_policy_free(struct sbx_net_policy *p) { free(p); }

/* ---- matching ------------------------------------------------------------ */

static bool port_ok(uint16_t rule, uint16_t asked)
{
  return rule == 0 || asked == 0 || rule == asked;
}

bool sbx_net_rule_match_name(const struct sbx_net_rule *r, const char *name, uint16_t port)
{
  if (!port_ok(r->port, port))
    return false;
  if (r->kind == SBX_NET_RULE_DOMAIN)
    return strcmp(r->name, name) == 0;
  if (r->kind != SBX_NET_RULE_WILDCARD)
    return false;
  /* Strictly below: "*.example.org" admits a.example.org, not example.org
   * and not badexample.org. */
  size_t n = strlen(name), rn = strlen(r->name);
  return n > rn + 1 && name[n - rn - 1] == '.' && strcmp(name + n - rn, r->name) == 0;
}

int sbx_net_policy_match_name(const struct sbx_net_policy *p, const char *name, uint16_t port)
{
  if (!p || p->egress != SBX_NET_EGRESS_ALLOWLIST || !name)
    return -1;
  /* Lower-case, without the trailing dot; names that are not host names
   * match nothing. */
  char norm[254];
  if (sbx_net_name_normalize(name, norm, sizeof norm) < 0)
    return -1;
  for (size_t i = 0; i < p->nrules; i++)
    if (sbx_net_rule_match_name(&p->rules[i], norm, port))
      return (int)i;
  return -1;
}

static bool cidr_has(const struct sbx_net_rule *r, int family, const void *addr)
{
  return r->kind == SBX_NET_RULE_CIDR && r->family == family &&
         sbx_net_prefix_match(r->addr, addr, r->prefix);
}

int sbx_net_policy_match_addr(const struct sbx_net_policy *p, int family, const void *addr,
                              uint16_t port)
{
  if (!p || p->egress != SBX_NET_EGRESS_ALLOWLIST || !addr)
    return -1;
  for (size_t i = 0; i < p->nrules; i++)
    if (cidr_has(&p->rules[i], family, addr) && port_ok(p->rules[i].port, port))
      return (int)i;
  return -1;
}

int sbx_net_policy_match_closed(const struct sbx_net_policy *p, int family, const void *addr,
                                uint16_t port)
{
  if (!p || p->egress != SBX_NET_EGRESS_ALLOWLIST || !addr)
    return -1;
  unsigned need = 0;
  if (!sbx_net_addr_closed_prefix(family, addr, &need))
    return sbx_net_policy_match_addr(p, family, addr, port);
  for (size_t i = 0; i < p->nrules; i++) {
    const struct sbx_net_rule *r = &p->rules[i];
    if (cidr_has(r, family, addr) && r->prefix >= need && port_ok(r->port, port))
      return (int)i;
  }
  return -1;
}
