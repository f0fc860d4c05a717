/* http_check.h — checks on what a client sent before anything acts on it:
 * the request-target's percent-encoding (libmicrohttpd decodes leniently:
 * "%zz" stays as is, "%00" cuts a value short, any byte sequence passes)
 * and the message framing headers (RFC 9112 §6.1: Content-Length together
 * with Transfer-Encoding is how requests are smuggled past a proxy).
 * Pure functions over strings, so the unit tests and the fuzz corpus can
 * drive them without a server. */
#ifndef SBX_API_HTTP_CHECK_H
#define SBX_API_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* What the target check found wrong: kind is a short English reason
 * ("a malformed %-escape", "an encoded NUL byte", "invalid UTF-8"); for a
 * path segment, segment is its index (0 = the one after the first '/');
 * for a query parameter, name is its decoded name ("" when the name
 * itself is undecodable). */
struct sbx_target_fault {
  const char *kind;
  bool in_query;
  size_t segment;
  char name[64];
};

/* 0 if every path segment and query name and value of target ("/a/b?x=1")
 * percent-decodes cleanly (and, when utf8, to valid UTF-8); else -1 and
 * *f says where.  The query is decoded as a form ('+' is a space). */
int sbx_http_check_target(const char *target, bool utf8, struct sbx_target_fault *f);

/* Strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
bool sbx_http_utf8_valid(const unsigned char *s, size_t n);

/* Framing: feed every request header (name, value) in arrival order, then
 * ask for the verdict.  A verdict is NULL (fine) or the English reason the
 * request must be refused with 400 and its connection closed, with the
 * offending header's name in *field. */
struct sbx_framing {
  unsigned content_lengths;
  unsigned transfer_encodings;
  bool lengths_differ;
  bool not_chunked;
  bool bad_name;
  char first_length[32];
};
void sbx_http_framing_add(struct sbx_framing *fr, const char *name, const char *value);
const char *sbx_http_framing_verdict(const struct sbx_framing *fr, const char **field);

#endif
