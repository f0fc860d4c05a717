/* cmd_common.c — the steps every offline subcommand (key, audit, db) shares:
 * walking its argument list (the config flags taken here, its own handed
 * to it) and opening the store
 * the daemon would use, each reporting its own error on stderr so the
 * subcommands only map failure to an exit code. */
#include "daemon/commands.h"

#include <stdio.h>
#include <string.h>

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

int sbx_cmd_args(struct sbx_config *cfg, int argc, char **argv,
                 bool (*own)(void *ctx, int argc, char **argv, int *i), void *ctx)
{
  for (int i = 1; i < argc; i++) {
    int used = sbx_cmd_config_flag(cfg, argc, argv, &i);
    if (used < 0)
      return -1;
    if (!used && !own(ctx, argc, argv, &i))
      return i;
  }
  return 0;
}

bool sbx_cmd_value(const char *name, int argc, char **argv, int *i, const char **value)
{
  size_t n = strlen(name);
  if (!strcmp(argv[*i], name) && *i + 1 < argc) {
    *value = argv[++*i];
    return true;
  }
  if (!strncmp(argv[*i], name, n) && argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return true;
  }
  return false;
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
