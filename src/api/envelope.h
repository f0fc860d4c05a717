/* envelope.h — error → HTTP status and error envelope, language choice. */
#ifndef SBX_API_ENVELOPE_H
#define SBX_API_ENVELOPE_H

#include <jansson.h>

#include "common/err.h"

int sbx_envelope_status(enum sbx_errcode code);
const char *sbx_envelope_code_name(enum sbx_errcode code);
/* "fr" or "en" from an Accept-Language header (NULL → "en"). */
void sbx_envelope_lang(const char *accept_language, char out[3]);
/* Each violation ({path, message_i18n: {en, fr}}) gets "message" in lang
 * ("fr" or else English); message_i18n stays. */
void sbx_envelope_localise(json_t *violations, const char *lang);
/* New reference to {"error":{…}}. */
json_t *sbx_envelope_build(const struct sbx_error *err, const char *lang,
                           const char *request_id);

#endif
