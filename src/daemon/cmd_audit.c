/* cmd_audit.c — `sandboxd audit verify [--state-dir DIR | --database URL]`:
 * walks the audit chain in the daemon's store (safe while the daemon runs:
 * it only reads) and exits 0 when it is intact, else prints the first
 * broken sequence number and what is wrong there and exits 1. */
#include "daemon/commands.h"

#include <stdio.h>
#include <string.h>

#include "obs/audit.h"
#include "store/store.h"

static int usage(void)
{
  fprintf(stderr, "usage: sandboxd audit verify [--state-dir DIR | --database URL] [--json]\n");
  return 2;
}

static bool audit_arg(void *ctx, int argc, char **argv, int *i)
{
  (void)argc;
  if (strcmp(argv[*i], "--json") != 0)
    return false;
  *(bool *)ctx = true;
  return true;
}

int sbx_cmd_audit(struct sbx_config *cfg, int argc, char **argv)
{
  bool as_json = false;
  if (argc < 1 || strcmp(argv[0], "verify") != 0)
    return usage();
  int bad = sbx_cmd_args(cfg, argc, argv, audit_arg, &as_json);
  if (bad)
    return bad < 0 ? 2 : usage();
  struct sbx_store_handle st;
  if (sbx_cmd_open_store(cfg, &st) < 0)
    return 2;
  struct sbx_error err = {0};
  struct sbx_audit_verdict v;
  int rc = sbx_audit_verify(&st, &v, &err);
  sbx_store_close(&st);
  if (rc < 0) {
    fprintf(stderr, "sandboxd: audit verify: %s\n", err.msg);
    return 2;
  }
  if (as_json) {
    json_t *o = sbx_audit_verdict_json(&v);
    json_dumpf(o, stdout, JSON_COMPACT | JSON_SORT_KEYS);
    putchar('\n');
    json_decref(o);
  } else if (v.ok) {
    printf("audit chain intact: %lld events, head %s\n", (long long)v.events, v.head_hash);
  } else {
    printf("audit chain BROKEN at sequence %lld: %s\n", (long long)v.broken_seq, v.problem);
    printf("(%lld events verified before it)\n", (long long)v.events);
  }
  return v.ok ? 0 : 1;
}
