/* sni.h — the egress proxy's parsers of what a sandbox sends first: the
 * server_name of a TLS ClientHello and the head of an HTTP/1.x request.
 *
 * Everything parsed here comes from a hostile sandbox: the parsers read at
 * most SBX_NET_HEAD_MAX bytes, never allocate, never trust a length field
 * beyond the bytes present, and accept names only in the strict form the
 * policy matches (lower-case LDH labels, or an IP literal).  Pure functions
 * of their input, so they are unit-tested and fuzzable without sockets. */
#ifndef SBX_NET_SNI_H
#define SBX_NET_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most the proxy buffers before it decides: a ClientHello (possibly
 * split over several records and TCP segments) or a request head. */
#define SBX_NET_HEAD_MAX 16384

enum sbx_net_parse {
  SBX_NET_PARSE_OK = 0,
  SBX_NET_PARSE_MORE = 1,    /* well-formed so far, needs more bytes */
  SBX_NET_PARSE_NONE = 2,    /* a complete ClientHello without server_name */
  SBX_NET_PARSE_BAD = -1,    /* malformed (TLS: not a ClientHello; HTTP: 400) */
  SBX_NET_PARSE_TOO_BIG = -2 /* over SBX_NET_HEAD_MAX (HTTP: 431) */
};

/* Whether the first bytes look like a TLS handshake record (0x16 0x03 …). */
bool sbx_net_looks_tls(const uint8_t *buf, size_t len);

/* Finds the host_name of the server_name extension of the ClientHello at
 * the start of buf (TLS records, handshake possibly fragmented across
 * records).  On OK, name holds the lower-cased name without trailing dot
 * (namesz ≥ 254 recommended). */
enum sbx_net_parse sbx_net_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namesz);

/* Normalises a host name or IP literal (brackets removed for IPv6) into
 * out: lower-case, no trailing dot, LDH labels of 1..63 bytes, ≤ 253 bytes;
 * a name whose last label is numeric must be a dotted-quad IPv4 address.
 * Returns 0, or -1 when it is not acceptable. */
int sbx_net_host_normalize(const char *s, size_t len, char *out, size_t outsz);

enum sbx_net_http_form {
  SBX_NET_HTTP_ORIGIN,    /* GET /path — transparent mode */
  SBX_NET_HTTP_ABSOLUTE,  /* GET http://host[:port]/path — explicit proxy */
  SBX_NET_HTTP_AUTHORITY, /* CONNECT host:port — explicit proxy */
};

struct sbx_net_http_req {
  char method[16];
  enum sbx_net_http_form form;
  char host[256];  /* from the target (absolute, CONNECT) or Host header; "" if none */
  uint16_t port;   /* 0 when the request named none */
  char version[9]; /* "HTTP/1.0" or "HTTP/1.1" */
  size_t target_off, target_len; /* the request target as written */
  size_t path_off; /* absolute form: what follows the authority (path_len 0 → "/") */
  size_t path_len;
  size_t authority_off, authority_len; /* absolute form: "host[:port]" as written */
  size_t line_end;                     /* offset just past the request line's CRLF */
  size_t head_len;                     /* offset just past the blank line ending the head */
};

/* Parses the request head at the start of buf.  Strict: CRLF line ends,
 * no obs-fold, no control bytes, one Host header at most, ≤ 100 headers,
 * scheme http only in absolute form, a port with CONNECT. */
enum sbx_net_parse sbx_net_http_parse(const char *buf, size_t len, struct sbx_net_http_req *r);

/* Writes the head to send upstream: the request line in origin form, the
 * headers minus Connection, Keep-Alive, Proxy-Connection and
 * Proxy-Authorization (and Host in absolute form, replaced by the URI's
 * authority), then "Connection: close", so the upstream ends the
 * connection after this one checked request.  Returns the length, or -1
 * when outsz is too small (head_len + 512 always suffices). */
long sbx_net_http_rewrite(const char *buf, const struct sbx_net_http_req *r, char *out,
                          size_t outsz);

#endif
