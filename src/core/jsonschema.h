/* jsonschema.h — JSON Schema (draft-07) validation for the contracts
 * (core/contracts.c), a small C face on valijson (Debian's libvalijson-dev,
 * header-only C++) with nlohmann-json as its JSON adapter, implemented in
 * jsonschema.cc.  No C++ exception crosses this boundary: each is caught
 * and becomes an sbx_error.
 *
 * Hostile input: a document nesting deeper than SBX_JSCHEMA_MAX_DEPTH is
 * refused before it is parsed (400 with a clear message); a schema the
 * caller supplied is checked by sbx_jschema_check_refs before it is compiled
 * (only local "#..." $refs that resolve, and no loop of $ref/allOf/anyOf/
 * oneOf/not/if/then/else that comes back to a schema without descending
 * into the instance: such a loop would never end). */
#ifndef SBX_CORE_JSONSCHEMA_H
#define SBX_CORE_JSONSCHEMA_H

#include <stddef.h>

#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_JSCHEMA_MAX_DEPTH 64

struct sbx_jschema; /* a compiled schema: immutable, shareable between threads */
struct sbx_jdoc;    /* a parsed JSON document */

/* One violation: the JSON pointer of the value at fault ("" for the root),
 * the message in English and in French.  The strings are borrowed for the
 * call only. */
typedef void (*sbx_jschema_violation_fn)(void *ctx, const char *path, const char *msg_en,
                                         const char *msg_fr);

/* Parses len bytes of JSON.  NULL with err (SBX_E_INVALID) when it is not
 * JSON or nests deeper than SBX_JSCHEMA_MAX_DEPTH.  Free with
 * sbx_jdoc_free. */
struct sbx_jdoc *sbx_jdoc_parse(const char *text, size_t len, struct sbx_error *err);
void sbx_jdoc_free(struct sbx_jdoc *d);
/* The value at JSON pointer `at` is an object (false when absent). */
int sbx_jdoc_is_object(const struct sbx_jdoc *d, const char *at);
/* The string at `at`, copied into buf; -1 when absent, not a string or too long. */
int sbx_jdoc_string(const struct sbx_jdoc *d, const char *at, char *buf, size_t size);

/* Compiles the schema at pointer `at` ("" for the root) of d.  Refs are
 * checked as sbx_jschema_check_refs does; a failure is an SBX_E_INVALID
 * error naming the first problem.  Free with sbx_jschema_free. */
struct sbx_jschema *sbx_jschema_compile(const struct sbx_jdoc *d, const char *at,
                                        struct sbx_error *err);
void sbx_jschema_free(struct sbx_jschema *s);

/* Validates the value at `at` of d against s, calling fn once per
 * violation with its full path in d.  Returns the number of violations
 * (0: valid; also 0 when `at` is absent), or -1 with err. */
int sbx_jschema_validate(const struct sbx_jschema *s, const struct sbx_jdoc *d, const char *at,
                         sbx_jschema_violation_fn fn, void *ctx, struct sbx_error *err);

/* Checks the schema at `at` of d can be compiled safely: every $ref is
 * local ("#" plus a JSON pointer) and resolves, and no in-place loop exists.
 * Each problem is a violation (fn); then it tries to compile it and reports
 * the library's refusal as one more.  Returns the number of violations, or
 * -1 with err. */
int sbx_jschema_check_schema(const struct sbx_jdoc *d, const char *at,
                             sbx_jschema_violation_fn fn, void *ctx, struct sbx_error *err);

#ifdef __cplusplus
}
#endif

#endif
