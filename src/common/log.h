/* log.h — levelled logs: text on a tty, JSON lines otherwise.
 * Thread-safe; writes one line per call to stderr (or the configured fd). */
#ifndef SBX_COMMON_LOG_H
#define SBX_COMMON_LOG_H

enum sbx_log_level { SBX_LOG_DEBUG, SBX_LOG_INFO, SBX_LOG_WARN, SBX_LOG_ERROR };

/* level: minimum level printed; json: -1 auto (JSON unless fd is a tty). */
void sbx_log_init(enum sbx_log_level level, int json);
int sbx_log_parse_level(const char *s, enum sbx_log_level *out);
void sbx_log(enum sbx_log_level level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define sbx_debug(sub, ...) sbx_log(SBX_LOG_DEBUG, sub, __VA_ARGS__)
#define sbx_info(sub, ...) sbx_log(SBX_LOG_INFO, sub, __VA_ARGS__)
#define sbx_warn(sub, ...) sbx_log(SBX_LOG_WARN, sub, __VA_ARGS__)
#define sbx_error(sub, ...) sbx_log(SBX_LOG_ERROR, sub, __VA_ARGS__)

#endif
