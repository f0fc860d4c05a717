/* audit_limit.c — the limiter that keeps a flood of refusals (bad keys,
 * quota denials) from filling the audit table: a fixed table of sources,
 * each allowed SBX_AUDIT_DENIALS_PER_MIN events per minute, plus a global
 * ceiling so many sources (an IPv6 range) cannot add up to a flood either.
 * Dropped events are counted per source (reported in the next recorded
 * event's details) and in a metric.  Memory is fixed: when the table is
 * full the least recently seen source is forgotten. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "obs/audit.h"
#include "obs/metrics.h"

#define SOURCES 256

struct source {
  char key[96];
  int64_t minute;
  unsigned count;
  uint64_t suppressed;
  int64_t seen;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct source table[SOURCES];
static int64_t global_minute;
static unsigned global_count;

static struct source *find_or_take(const char *key, int64_t now)
{
  struct source *oldest = &table[0];
  for (int i = 0; i < SOURCES; i++) {
    if (table[i].key[0] && strcmp(table[i].key, key) == 0)
      return &table[i];
    if (table[i].seen < oldest->seen)
      oldest = &table[i];
  }
  memset(oldest, 0, sizeof *oldest);
  snprintf(oldest->key, sizeof oldest->key, "%s", key);
  oldest->minute = now / 60;
  return oldest;
}

bool sbx_audit_admit(const char *source, uint64_t *suppressed)
{
  int64_t now = sbx_wall_s();
  pthread_mutex_lock(&lock);
  struct source *s = find_or_take(source ? source : "", now);
  s->seen = now;
  if (s->minute != now / 60) {
    s->minute = now / 60;
    s->count = 0;
  }
  if (global_minute != now / 60) {
    global_minute = now / 60;
    global_count = 0;
  }
  bool ok =
      s->count < SBX_AUDIT_DENIALS_PER_MIN && global_count < SBX_AUDIT_DENIALS_GLOBAL_PER_MIN;
  if (ok) {
    s->count++;
    global_count++;
    *suppressed = s->suppressed;
    s->suppressed = 0;
  } else {
    s->suppressed++;
  }
  pthread_mutex_unlock(&lock);
  if (!ok)
    sbx_metrics_audit_suppressed();
  return ok;
}

void sbx_audit_limiter_reset(void)
{
  pthread_mutex_lock(&lock);
  memset(table, 0, sizeof table);
  global_count = 0;
  pthread_mutex_unlock(&lock);
}
