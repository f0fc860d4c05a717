/* ref.c — image references with Docker's normalisation:
 *   [domain/]path[:tag][@sha256:hex]
 * A first component is a domain when it holds '.' or ':' or is
 * "localhost"; without one the domain is docker.io, and a single-component
 * docker.io path gets "library/".  No tag and no digest means ":latest".
 * Registries on 127.0.0.0/8, ::1 or localhost speak plain HTTP (Docker's
 * default insecure-registry rule); everything else is HTTPS. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "image/image_int.h"

static bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := [_.] | __ | -+ */
static bool path_component_ok(const char *s, size_t n)
{
  if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
    return false;
  for (size_t i = 0; i < n;) {
    if (lower_alnum(s[i])) {
      i++;
      continue;
    }
    size_t j = i;
    if (s[i] == '.') {
      j = i + 1;
    } else if (s[i] == '_') {
      j = i + 1 + (s[i + 1] == '_');
    } else if (s[i] == '-') {
      while (j < n && s[j] == '-')
        j++;
    } else {
      return false;
    }
    if (j >= n || !lower_alnum(s[j]))
      return false;
    i = j;
  }
  return true;
}

static bool tag_ok(const char *t)
{
  size_t n = strlen(t);
  if (n == 0 || n > 128)
    return false;
  if (!(isalnum((unsigned char)t[0]) || t[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)t[i]) || t[i] == '_' || t[i] == '.' || t[i] == '-'))
      return false;
  return true;
}

/* host[:port], host a DNS name, IPv4 or [IPv6]. */
static bool domain_ok(const char *d)
{
  if (!*d || strlen(d) > 253)
    return false;
  const char *port = NULL;
  if (d[0] == '[') {
    const char *e = strchr(d, ']');
    if (!e)
      return false;
    char a[64];
    size_t n = (size_t)(e - d - 1);
    if (n == 0 || n >= sizeof a)
      return false;
    memcpy(a, d + 1, n);
    a[n] = '\0';
    struct in6_addr in6;
    if (inet_pton(AF_INET6, a, &in6) != 1)
      return false;
    if (e[1] == ':')
      port = e + 2;
    else if (e[1])
      return false;
  } else {
    const char *c = strchr(d, ':');
    size_t n = c ? (size_t)(c - d) : strlen(d);
    if (n == 0)
      return false;
    for (size_t i = 0; i < n; i++)
      if (!(isalnum((unsigned char)d[i]) || d[i] == '.' || d[i] == '-'))
        return false;
    if (d[0] == '-' || d[0] == '.')
      return false;
    port = c ? c + 1 : NULL;
  }
  if (port) {
    if (!*port || strlen(port) > 5)
      return false;
    for (const char *p = port; *p; p++)
      if (!isdigit((unsigned char)*p))
        return false;
  }
  return true;
}

static bool is_loopback(const char *domain)
{
  char host[256];
  if (domain[0] == '[') {
    const char *e = strchr(domain, ']');
    snprintf(host, sizeof host, "%.*s", (int)(e - domain - 1), domain + 1);
  } else {
    const char *c = strchr(domain, ':');
    snprintf(host, sizeof host, "%.*s", c ? (int)(c - domain) : (int)strlen(domain), domain);
  }
  if (!strcmp(host, "localhost"))
    return true;
  struct in_addr a4;
  if (inet_pton(AF_INET, host, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  struct in6_addr a6;
  if (inet_pton(AF_INET6, host, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

static int bad(struct sbx_error *err, const char *field, const char *text, const char *why)
{
  return sbx_err_field(err, field ? field : "image", "invalid image reference '%.200s': %s",
                       text, why);
}

/* Splits "rest" (after the domain) into repository, tag and digest. */
static int split_name(const char *text, const char *field, char *rest, struct sbx_image_ref *out,
                      struct sbx_error *err)
{
  char *at = strchr(rest, '@');
  if (at) {
    *at = '\0';
    if (!img_digest_valid(at + 1))
      return bad(err, field, text, "the digest must be sha256: and 64 lowercase hex digits");
    snprintf(out->digest, sizeof out->digest, "%s", at + 1);
  }
  char *slash = strrchr(rest, '/');
  char *colon = strrchr(slash ? slash : rest, ':');
  if (colon) {
    *colon = '\0';
    if (!tag_ok(colon + 1))
      return bad(err, field, text, "the tag must be [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    snprintf(out->tag, sizeof out->tag, "%s", colon + 1);
  }
  if (!*rest)
    return bad(err, field, text, "empty repository name");
  for (char *p = rest, *e; p; p = e ? e + 1 : NULL) {
    e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (!path_component_ok(p, n))
      return bad(err, field, text,
                 "repository names are lowercase letters, digits and separators (. _ __ -)");
  }
  if (strlen(rest) >= sizeof out->repository)
    return bad(err, field, text, "repository name too long");
  snprintf(out->repository, sizeof out->repository, "%s", rest);
  return 0;
}

int sbx_image_ref_parse(const char *text, const char *field, struct sbx_image_ref *out,
                        struct sbx_error *err)
{
  memset(out, 0, sizeof *out);
  if (!text || !*text)
    return bad(err, field, "", "empty");
  if (strlen(text) > 600)
    return bad(err, field, text, "longer than 600 characters");
  for (const char *p = text; *p; p++)
    if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
      return bad(err, field, text, "contains a space or a non-ASCII character");
  char buf[640];
  snprintf(buf, sizeof buf, "%s", text);
  char domain[256] = "docker.io";
  char *rest = buf;
  char *slash = strchr(buf, '/');
  if (slash) {
    *slash = '\0';
    /* '@' before the first '/' means the first part is not a domain */
    if (!strchr(buf, '@') &&
        (strchr(buf, '.') || strchr(buf, ':') || !strcmp(buf, "localhost") || buf[0] == '[')) {
      if (!domain_ok(buf))
        return bad(err, field, text, "invalid registry host");
      snprintf(domain, sizeof domain, "%s", buf);
      rest = slash + 1;
    } else {
      *slash = '/';
    }
  }
  if (!strcmp(domain, "index.docker.io"))
    snprintf(domain, sizeof domain, "docker.io");
  if (split_name(text, field, rest, out, err) < 0)
    return -1;
  bool hub = !strcmp(domain, "docker.io");
  if (hub && !strchr(out->repository, '/')) {
    char tmp[256];
    if (snprintf(tmp, sizeof tmp, "library/%s", out->repository) >= (int)sizeof tmp)
      return bad(err, field, text, "repository name too long");
    snprintf(out->repository, sizeof out->repository, "%s", tmp);
  }
  if (strlen(domain) + 1 + strlen(out->repository) > 255)
    return bad(err, field, text, "name longer than 255 characters");
  if (!out->tag[0] && !out->digest[0])
    snprintf(out->tag, sizeof out->tag, "latest");
  snprintf(out->registry, sizeof out->registry, "%s", hub ? "registry-1.docker.io" : domain);
  out->plain_http = is_loopback(domain);
  int n = snprintf(out->canonical, sizeof out->canonical, "%s/%s", domain, out->repository);
  if (out->tag[0])
    n += snprintf(out->canonical + n, sizeof out->canonical - (size_t)n, ":%s", out->tag);
  if (out->digest[0])
    snprintf(out->canonical + n, sizeof out->canonical - (size_t)n, "@%s", out->digest);
  return 0;
}
