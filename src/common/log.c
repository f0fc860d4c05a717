/* log.c — see log.h. */
#include "common/log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum sbx_log_level min_level = SBX_LOG_INFO;
static int as_json = -1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void sbx_log_init(enum sbx_log_level level, int json)
{
  min_level = level;
  as_json = json < 0 ? !isatty(STDERR_FILENO) : json;
}

int sbx_log_parse_level(const char *s, enum sbx_log_level *out)
{
  for (int i = 0; i < 4; i++)
    if (strcmp(s, level_names[i]) == 0) {
      *out = (enum sbx_log_level)i;
      return 0;
    }
  return -1;
}

void sbx_log(enum sbx_log_level level, const char *subsystem, const char *fmt, ...)
{
  if (level < min_level)
    return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char ts[40];
  size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(ts + n, sizeof ts - n, ".%03ldZ", (long)(tv.tv_usec / 1000));

  pthread_mutex_lock(&log_lock);
  if (as_json > 0) {
    json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "ts", ts, "level", level_names[level],
                          "subsystem", subsystem, "msg", msg);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (line) {
      fprintf(stderr, "%s\n", line);
      free(line);
    }
    json_decref(o);
  } else {
    fprintf(stderr, "%s %-5s [%s] %s\n", ts, level_names[level], subsystem, msg);
  }
  fflush(stderr);
  pthread_mutex_unlock(&log_lock);
}
