/* cmd_common.c — the steps every offline subcommand (key, audit, db) shares:
 * taking the config flags out of its argument list and opening the store
 * the daemon would use, each reporting its own error on stderr so the
 * subcommands only map failure to an exit code. */
#include "daemon/commands.h"

#include <stdio.h>

int sbx_cmd_config_flag(struct sbx_config *cfg, int argc, char **argv, int *i)
{
  struct sbx_error err = {0};
  int used = sbx_config_flag(cfg, argc, argv, *i, &err);
  if (used < 0) {
    fprintf(stderr, "sandboxd: %s\n", err.msg);
    return -1;
  }
  if (used > 0)
    *i += used - 1;
  return used > 0;
}

int sbx_cmd_open_store(struct sbx_config *cfg, struct sbx_store_handle *st)
{
  struct sbx_error err = {0};
  if (sbx_config_resolve_state(cfg, &err) < 0 ||
      sbx_store_open(cfg->database_url, cfg->state_dir, st, &err) < 0) {
    fprintf(stderr, "sandboxd: %s\n", err.msg);
    return -1;
  }
  return 0;
}
