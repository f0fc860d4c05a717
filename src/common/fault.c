/* fault.c — the table behind fault.h: parsing SANDBOXD_FAULTS once at
 * start, and the per-point counters the sites consult.  The table is
 * written only before the daemon's first thread and read-only after,
 * except the counters, which are atomics. */
#include "common/fault.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"

#ifdef SBX_FAULT_INJECTION
static const char *const point_names[SBX_FAULT__COUNT] = {
    [SBX_FAULT_CLONE] = "clone", [SBX_FAULT_UNSHARE] = "unshare",
    [SBX_FAULT_MOUNT] = "mount", [SBX_FAULT_CGROUP_WRITE] = "cgroup_write",
    [SBX_FAULT_NFT] = "nft",     [SBX_FAULT_STORE_WRITE] = "store_write",
    [SBX_FAULT_ALLOC] = "alloc",
};

static const struct {
  const char *name;
  int value;
} errnos[] = {
    {"EIO", EIO},       {"ENOMEM", ENOMEM}, {"ENOSPC", ENOSPC}, {"EACCES", EACCES},
    {"EPERM", EPERM},   {"EAGAIN", EAGAIN}, {"EINVAL", EINVAL}, {"EBUSY", EBUSY},
    {"ENOENT", ENOENT}, {"EEXIST", EEXIST}, {"EMFILE", EMFILE}, {"ENOSYS", ENOSYS},
};

/* Ceiling on N: a count past it is a typo, not a plan. */
#define FAULT_MAX_N 1000000u

struct fault_rule {
  bool armed;
  unsigned from; /* first call that fails (1-based) */
  bool onward;   /* and every later one */
  int err;
};

static struct fault_rule rules[SBX_FAULT__COUNT];
/* Shared (MAP_SHARED) with the children cloned for a sandbox until they
 * exec sbx-init: a mount in a child counts where the daemon sees it, so
 * "mount:7" fails one mount in all, not the 7th of every sandbox. */
static unsigned *calls;

static const char *errno_name(int e)
{
  for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
    if (errnos[i].value == e)
      return errnos[i].name;
  return "errno";
}

/* Digits of v into buf (no stdio: this runs in freshly cloned children). */
static size_t put_uint(char *buf, unsigned v)
{
  char tmp[12];
  size_t n = 0, i = 0;
  do
    tmp[n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < sizeof tmp);
  while (n)
    buf[i++] = tmp[--n];
  return i;
}

static size_t put_str(char *buf, const char *s)
{
  size_t n = strlen(s); /* async-signal-safe in practice; bounded names */
  memcpy(buf, s, n);
  return n;
}

static void report(enum sbx_fault_point p, unsigned n, int e)
{
  char line[128];
  size_t k = put_str(line, "sandboxd: fault injected: ");
  k += put_str(line + k, point_names[p]);
  k += put_str(line + k, " #");
  k += put_uint(line + k, n);
  k += put_str(line + k, " (");
  k += put_str(line + k, errno_name(e));
  k += put_str(line + k, ")\n");
  ssize_t w = write(2, line, k);
  (void)w;
}

bool sbx_fault(enum sbx_fault_point p)
{
  const struct fault_rule *r = &rules[p];
  if (!r->armed || !calls)
    return false;
  unsigned n = __atomic_add_fetch(&calls[p], 1, __ATOMIC_RELAXED);
  if (n < r->from || (n > r->from && !r->onward))
    return false;
  report(p, n, r->err);
  errno = r->err;
  return true;
}

/* jansson's allocator while "alloc" is armed: every JSON value the daemon
 * builds or parses goes through here. */
static void *fault_malloc(size_t n) { return sbx_fault(SBX_FAULT_ALLOC) ? NULL : malloc(n); }

static int parse_errno(const char *s, int *out)
{
  for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
    if (!strcmp(s, errnos[i].name)) {
      *out = errnos[i].value;
      return 0;
    }
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v <= 0 || v > 4095)
    return -1;
  *out = (int)v;
  return 0;
}

static int parse_when(const char *s, struct fault_rule *r)
{
  if (!strcmp(s, "*")) {
    r->from = 1;
    r->onward = true;
    return 0;
  }
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (end == s || v == 0 || v > FAULT_MAX_N)
    return -1;
  r->from = (unsigned)v;
  r->onward = *end == '+';
  return end[r->onward ? 1 : 0] ? -1 : 0;
}

static int point_of(const char *name)
{
  for (int i = 0; i < SBX_FAULT__COUNT; i++)
    if (!strcmp(name, point_names[i]))
      return i;
  return -1;
}

/* One POINT:WHEN[:ERRNO] item (tok is modified). */
static int parse_item(char *tok, struct sbx_error *err)
{
  char *when = strchr(tok, ':');
  if (!when)
    return sbx_err_set(err, SBX_E_INVALID, 0, "SANDBOXD_FAULTS: '%s' is not POINT:WHEN", tok);
  *when++ = '\0';
  char *en = strchr(when, ':');
  if (en)
    *en++ = '\0';
  int p = point_of(tok);
  struct fault_rule r = {.armed = true};
  r.err = p == SBX_FAULT_ALLOC ? ENOMEM : EIO;
  if (p < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "SANDBOXD_FAULTS: unknown point '%s'", tok);
  if (parse_when(when, &r) < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "SANDBOXD_FAULTS: %s: bad WHEN '%s'", tok, when);
  if (en && parse_errno(en, &r.err) < 0)
    return sbx_err_set(err, SBX_E_INVALID, 0, "SANDBOXD_FAULTS: %s: bad errno '%s'", tok, en);
  rules[p] = r;
  return 0;
}

int sbx_fault_arm(const char *spec, struct sbx_error *err)
{
  char buf[1024];
  if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
    return sbx_err_set(err, SBX_E_INVALID, 0, "SANDBOXD_FAULTS: too long");
  calls = mmap(NULL, sizeof(unsigned) * SBX_FAULT__COUNT, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (calls == MAP_FAILED) {
    calls = NULL;
    return sbx_err_sys(err, errno, "SANDBOXD_FAULTS: counters");
  }
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (parse_item(tok, err) < 0)
      return -1;
  if (rules[SBX_FAULT_ALLOC].armed)
    json_set_alloc_funcs(fault_malloc, free);
  sbx_warn("fault", "fault injection armed: %s", spec);
  return 0;
}
#else
int sbx_fault_arm(const char *spec, struct sbx_error *err)
{
  (void)spec;
  return sbx_err_set(err, SBX_E_INVALID, 0,
                     "SANDBOXD_FAULTS is set but this build has no fault injection");
}
#endif

int sbx_fault_arm_from_env(struct sbx_error *err)
{
  const char *spec = getenv("SANDBOXD_FAULTS");
  if (!spec || !*spec)
    return 0;
  int r = sbx_fault_arm(spec, err);
  unsetenv("SANDBOXD_FAULTS");
  return r;
}
