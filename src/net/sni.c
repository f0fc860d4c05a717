/* sni.c — owns the egress proxy's parsers of hostile first bytes: the TLS
 * ClientHello's server_name (RFC 8446 §4.1.2, RFC 6066 §3) and HTTP/1.x
 * request heads (RFC 9112 §3, §5).  See sni.h for the contract.
 *
 * Why strict: the proxy decides on what it parses here and then hands the
 * very same bytes to a server that parses them again.  Anything two parsers
 * might read differently (bare LF, folded headers, two Host headers, two
 * server_name extensions, userinfo in an authority) is refused rather than
 * guessed at, so the name we checked is the name the server sees. */
#include "net/sni.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

/* ---- names ---------------------------------------------------------- */

static bool ldh(unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* out gets the canonical text of an IP literal, or -1 if s is none. */
static int ip_literal(const char *s, size_t len, char *out, size_t outsz)
{
  char tmp[64];
  unsigned char bin[16];
  if (len == 0 || len >= sizeof tmp)
    return -1;
  memcpy(tmp, s, len);
  tmp[len] = 0;
  int fam = memchr(tmp, ':', len) ? AF_INET6 : AF_INET;
  if (inet_pton(fam, tmp, bin) != 1)
    return -1;
  return inet_ntop(fam, bin, out, (socklen_t)outsz) ? 0 : -1;
}

int sbx_net_host_normalize(const char *s, size_t len, char *out, size_t outsz)
{
  if (len >= 2 && s[0] == '[' && s[len - 1] == ']')
    return memchr(s + 1, ':', len - 2) ? ip_literal(s + 1, len - 2, out, outsz) : -1;
  if (memchr(s, ':', len))
    return ip_literal(s, len, out, outsz);
  if (len > 0 && s[len - 1] == '.')
    len--; /* "pypi.org." is "pypi.org" */
  if (len == 0 || len > 253 || len >= outsz)
    return -1;
  size_t label = 0;
  bool last_numeric = true;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)tolower((unsigned char)s[i]);
    if (c == '.') {
      if (label == 0)
        return -1;
      label = 0;
      last_numeric = true;
    } else if (!ldh(c) || ++label > 63) {
      return -1;
    } else if (!(c >= '0' && c <= '9')) {
      last_numeric = false;
    }
    out[i] = (char)c;
  }
  out[len] = 0;
  if (label == 0)
    return -1;
  /* "127.1", "2130706433", "0x7f.1": resolvers read those as addresses;
   * only the dotted quad is accepted, and then in canonical form. */
  if (last_numeric)
    return ip_literal(out, len, out, outsz);
  return 0;
}

/* ---- TLS ------------------------------------------------------------ */

bool sbx_net_looks_tls(const uint8_t *buf, size_t len)
{
  return len >= 1 && buf[0] == 0x16 && (len < 2 || buf[1] == 0x03);
}

struct cur {
  const uint8_t *p;
  size_t n;
};

static bool take(struct cur *c, size_t k, struct cur *sub)
{
  if (c->n < k)
    return false;
  if (sub)
    *sub = (struct cur){c->p, k};
  c->p += k;
  c->n -= k;
  return true;
}

static bool take_u8(struct cur *c, size_t *v)
{
  if (c->n < 1)
    return false;
  *v = c->p[0];
  return take(c, 1, NULL);
}

static bool take_u16(struct cur *c, size_t *v)
{
  if (c->n < 2)
    return false;
  *v = (size_t)c->p[0] << 8 | c->p[1];
  return take(c, 2, NULL);
}

/* A length-prefixed vector: prefix of `width` bytes (1 or 2). */
static bool take_vec(struct cur *c, int width, struct cur *sub)
{
  size_t k;
  if (!(width == 1 ? take_u8(c, &k) : take_u16(c, &k)))
    return false;
  return take(c, k, sub);
}

/* The server_name extension body: a list of (type, name); host_name is 0. */
static enum sbx_net_parse sni_ext(struct cur ext, char *name, size_t namesz)
{
  struct cur list, entry;
  if (!take_vec(&ext, 2, &list) || ext.n != 0)
    return SBX_NET_PARSE_BAD;
  while (list.n) {
    size_t type;
    if (!take_u8(&list, &type) || !take_vec(&list, 2, &entry))
      return SBX_NET_PARSE_BAD;
    if (type != 0)
      continue;
    char tmp[64];
    if (sbx_net_host_normalize((const char *)entry.p, entry.n, name, namesz) < 0 ||
        ip_literal(name, strlen(name), tmp, sizeof tmp) == 0) /* RFC 6066: no literals */
      return SBX_NET_PARSE_BAD;
    return SBX_NET_PARSE_OK;
  }
  return SBX_NET_PARSE_NONE;
}

static enum sbx_net_parse client_hello(struct cur b, char *name, size_t namesz)
{
  struct cur sid, suites, comp, exts, ext;
  if (!take(&b, 2 + 32, NULL) || !take_vec(&b, 1, &sid) || sid.n > 32 ||
      !take_vec(&b, 2, &suites) || suites.n < 2 || suites.n % 2 || !take_vec(&b, 1, &comp) ||
      comp.n < 1)
    return SBX_NET_PARSE_BAD;
  if (b.n == 0)
    return SBX_NET_PARSE_NONE; /* no extensions at all */
  if (!take_vec(&b, 2, &exts) || b.n != 0)
    return SBX_NET_PARSE_BAD;
  enum sbx_net_parse found = SBX_NET_PARSE_NONE;
  while (exts.n) {
    size_t type;
    if (!take_u16(&exts, &type) || !take_vec(&exts, 2, &ext))
      return SBX_NET_PARSE_BAD;
    if (type != 0)
      continue;
    if (found != SBX_NET_PARSE_NONE)
      return SBX_NET_PARSE_BAD; /* two server_name extensions: which one would the server use? */
    found = sni_ext(ext, name, namesz);
    if (found == SBX_NET_PARSE_BAD)
      return found;
  }
  return found;
}

enum sbx_net_parse sbx_net_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namesz)
{
  /* The handshake message may be cut across records (and records across
   * segments): gather the handshake bytes of consecutive records first. */
  uint8_t hs[SBX_NET_HEAD_MAX];
  size_t hl = 0, off = 0;
  if (len > SBX_NET_HEAD_MAX)
    len = SBX_NET_HEAD_MAX;
  while (off < len) {
    if (buf[off] != 0x16 || (len - off >= 2 && buf[off + 1] != 0x03))
      return SBX_NET_PARSE_BAD;
    if (len - off < 5)
      break;
    size_t rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
    if (rlen == 0 || rlen > 16384)
      return SBX_NET_PARSE_BAD;
    size_t avail = len - off - 5 < rlen ? len - off - 5 : rlen;
    if (avail > sizeof hs - hl)
      return SBX_NET_PARSE_TOO_BIG;
    memcpy(hs + hl, buf + off + 5, avail);
    hl += avail;
    off += 5 + avail;
  }
  if (hl >= 1 && hs[0] != 1)
    return SBX_NET_PARSE_BAD; /* not a ClientHello */
  if (hl < 4)
    return len >= SBX_NET_HEAD_MAX ? SBX_NET_PARSE_TOO_BIG : SBX_NET_PARSE_MORE;
  size_t mlen = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
  if (mlen > SBX_NET_HEAD_MAX - 4)
    return SBX_NET_PARSE_TOO_BIG;
  if (hl < 4 + mlen)
    return len >= SBX_NET_HEAD_MAX ? SBX_NET_PARSE_TOO_BIG : SBX_NET_PARSE_MORE;
  return client_hello((struct cur){hs + 4, mlen}, name, namesz);
}

/* ---- HTTP ----------------------------------------------------------- */

static bool tchar(unsigned char c) { return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

/* "host[:port]" or "[v6][:port]"; port_required for CONNECT. */
static int authority(const char *s, size_t n, bool port_required, char *host, size_t hostsz,
                     uint16_t *port)
{
  size_t hlen = n;
  const char *colon = NULL;
  if (n && s[0] == '[') {
    const char *rb = memchr(s, ']', n);
    if (!rb)
      return -1;
    hlen = (size_t)(rb - s) + 1;
    if (hlen < n) {
      if (s[hlen] != ':')
        return -1;
      colon = s + hlen;
    }
  } else if ((colon = memrchr(s, ':', n))) {
    hlen = (size_t)(colon - s);
  }
  *port = 0;
  if (colon) {
    size_t plen = n - (size_t)(colon - s) - 1;
    unsigned long v = 0;
    if (plen == 0 || plen > 5)
      return -1;
    for (size_t i = 0; i < plen; i++) {
      if (colon[1 + i] < '0' || colon[1 + i] > '9')
        return -1;
      v = v * 10 + (unsigned long)(colon[1 + i] - '0');
    }
    if (v == 0 || v > 65535)
      return -1;
    *port = (uint16_t)v;
  } else if (port_required) {
    return -1;
  }
  if (memchr(s, '@', hlen))
    return -1; /* userinfo: "allowed.example@evil.example" */
  return sbx_net_host_normalize(s, hlen, host, hostsz);
}

static int request_target(const char *buf, struct sbx_net_http_req *r)
{
  const char *t = buf + r->target_off;
  size_t n = r->target_len;
  if (strcmp(r->method, "CONNECT") == 0) {
    r->form = SBX_NET_HTTP_AUTHORITY;
    return authority(t, n, true, r->host, sizeof r->host, &r->port);
  }
  if (t[0] == '/' || (n == 1 && t[0] == '*')) {
    r->form = SBX_NET_HTTP_ORIGIN;
    return 0;
  }
  if (n < 7 || strncasecmp(t, "http://", 7) != 0)
    return -1; /* https:// would need TLS termination: clients use CONNECT for it */
  r->form = SBX_NET_HTTP_ABSOLUTE;
  size_t a = 7;
  while (a < n && !strchr("/?#", t[a]))
    a++;
  r->authority_off = r->target_off + 7;
  r->authority_len = a - 7;
  r->path_off = r->target_off + a;
  r->path_len = n - a;
  return authority(t + 7, a - 7, false, r->host, sizeof r->host, &r->port);
}

static int request_line(const char *buf, size_t n, struct sbx_net_http_req *r)
{
  size_t m = 0;
  while (m < n && buf[m] >= 'A' && buf[m] <= 'Z')
    m++;
  if (m == 0 || m >= sizeof r->method || m >= n || buf[m] != ' ')
    return -1;
  memcpy(r->method, buf, m);
  r->method[m] = 0;
  size_t t = m + 1, e = t;
  while (e < n && (unsigned char)buf[e] > 0x20 && (unsigned char)buf[e] < 0x7f)
    e++;
  if (e == t || e + 9 != n || buf[e] != ' ')
    return -1;
  if (memcmp(buf + e + 1, "HTTP/1.1", 8) != 0 && memcmp(buf + e + 1, "HTTP/1.0", 8) != 0)
    return -1;
  memcpy(r->version, buf + e + 1, 8);
  r->version[8] = 0;
  r->target_off = t;
  r->target_len = e - t;
  return request_target(buf, r);
}

/* Bytes allowed inside a line: visible ASCII, SP, HTAB, obs-text. */
static bool line_ok(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return false;
  }
  return true;
}

static bool header_is(const char *line, size_t nlen, const char *name)
{
  return strlen(name) == nlen && strncasecmp(line, name, nlen) == 0;
}

/* One "name: value" line; fills host from Host in origin form. */
static int header_line(const char *line, size_t ll, struct sbx_net_http_req *r, bool *have_host)
{
  size_t nlen = 0;
  while (nlen < ll && tchar((unsigned char)line[nlen]))
    nlen++;
  if (nlen == 0 || nlen == ll || line[nlen] != ':' || !line_ok(line, ll))
    return -1; /* also refuses obs-fold: a line starting with SP/HTAB has no name */
  if (!header_is(line, nlen, "host"))
    return 0;
  if (*have_host)
    return -1;
  *have_host = true;
  const char *v = line + nlen + 1, *end = line + ll;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
    end--;
  if (r->form != SBX_NET_HTTP_ORIGIN)
    return 0; /* the target's authority wins (RFC 9112 §3.2.2) */
  return authority(v, (size_t)(end - v), false, r->host, sizeof r->host, &r->port);
}

static enum sbx_net_parse incomplete(size_t len)
{
  return len >= SBX_NET_HEAD_MAX ? SBX_NET_PARSE_TOO_BIG : SBX_NET_PARSE_MORE;
}

enum sbx_net_parse sbx_net_http_parse(const char *buf, size_t len, struct sbx_net_http_req *r)
{
  memset(r, 0, sizeof *r);
  if (len > SBX_NET_HEAD_MAX)
    len = SBX_NET_HEAD_MAX;
  const char *eol = memmem(buf, len, "\r\n", 2);
  if (!eol) {
    size_t m = 0; /* refuse early what can never become a request line */
    while (m < len && m < 16 && buf[m] >= 'A' && buf[m] <= 'Z')
      m++;
    if (!line_ok(buf, len) || (m < len && buf[m] != ' ') || m >= 16)
      return SBX_NET_PARSE_BAD;
    return incomplete(len);
  }
  if (request_line(buf, (size_t)(eol - buf), r) < 0)
    return SBX_NET_PARSE_BAD;
  r->line_end = (size_t)(eol - buf) + 2;
  size_t off = r->line_end;
  int nheaders = 0;
  bool have_host = false;
  for (;;) {
    eol = memmem(buf + off, len - off, "\r\n", 2);
    if (!eol)
      return line_ok(buf + off, len - off) ? incomplete(len) : SBX_NET_PARSE_BAD;
    size_t ll = (size_t)(eol - (buf + off));
    if (ll == 0)
      break;
    if (++nheaders > 100)
      return SBX_NET_PARSE_TOO_BIG;
    if (header_line(buf + off, ll, r, &have_host) < 0)
      return SBX_NET_PARSE_BAD;
    off += ll + 2;
  }
  r->head_len = off + 2;
  return SBX_NET_PARSE_OK;
}

/* ---- rewrite -------------------------------------------------------- */

struct out {
  char *p;
  size_t n, cap;
  bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
  if (o->full || n > o->cap - o->n) {
    o->full = true;
    return;
  }
  memcpy(o->p + o->n, s, n);
  o->n += n;
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

long sbx_net_http_rewrite(const char *buf, const struct sbx_net_http_req *r, char *out,
                          size_t outsz)
{
  struct out o = {out, 0, outsz, false};
  bool absolute = r->form == SBX_NET_HTTP_ABSOLUTE;
  puts_(&o, r->method);
  puts_(&o, " ");
  if (absolute) {
    if (r->path_len == 0 || buf[r->path_off] != '/')
      puts_(&o, "/");
    put(&o, buf + r->path_off, r->path_len);
  } else {
    put(&o, buf + r->target_off, r->target_len);
  }
  puts_(&o, " ");
  puts_(&o, r->version);
  puts_(&o, "\r\n");
  if (absolute) {
    puts_(&o, "Host: ");
    put(&o, buf + r->authority_off, r->authority_len);
    puts_(&o, "\r\n");
  }
  for (size_t off = r->line_end; off + 2 < r->head_len;) {
    const char *line = buf + off;
    size_t ll = (size_t)((const char *)memmem(line, r->head_len - off, "\r\n", 2) - line);
    size_t nlen = (size_t)((const char *)memchr(line, ':', ll) - line);
    bool drop = header_is(line, nlen, "connection") || header_is(line, nlen, "keep-alive") ||
                header_is(line, nlen, "proxy-connection") ||
                header_is(line, nlen, "proxy-authorization") ||
                (absolute && header_is(line, nlen, "host"));
    if (!drop)
      put(&o, line, ll + 2);
    off += ll + 2;
  }
  puts_(&o, "Connection: close\r\n\r\n");
  return o.full ? -1 : (long)o.n;
}
