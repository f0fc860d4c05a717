/* cmd_key.c — `sandboxd key create --tenant NAME [--admin]`: creates the
 * tenant if needed and prints only the new key on stdout (so scripts can
 * capture it); the key is never stored, only its hash. */
#include "daemon/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "store/store.h"

struct key_args {
  const char *tenant;
  bool admin;
};

static bool key_arg(void *ctx, int argc, char **argv, int *i)
{
  struct key_args *a = ctx;
  if (sbx_cmd_value("--tenant", argc, argv, i, &a->tenant))
    return true;
  if (strcmp(argv[*i], "--admin") != 0)
    return false;
  a->admin = true;
  return true;
}

int sbx_cmd_key(struct sbx_config *cfg, int argc, char **argv)
{
  struct key_args a = {0};
  if (argc < 1 || strcmp(argv[0], "create") != 0) {
    fprintf(stderr, "usage: sandboxd key create --tenant NAME [--admin] "
                    "[--state-dir DIR | --database URL]\n");
    return 2;
  }
  int bad = sbx_cmd_args(cfg, argc, argv, key_arg, &a);
  if (bad > 0)
    fprintf(stderr, "sandboxd key create: unknown argument '%s'\n", argv[bad]);
  if (bad)
    return 2;
  if (!a.tenant) {
    fprintf(stderr, "sandboxd key create: --tenant NAME is required\n");
    return 2;
  }
  struct sbx_store_handle st;
  if (sbx_cmd_open_store(cfg, &st) < 0)
    return 1;
  struct sbx_error err = {0};
  char *key = NULL;
  int rc = sbx_keys_create(&st, a.tenant, a.admin, &key, &err);
  sbx_store_close(&st);
  if (rc < 0) {
    fprintf(stderr, "sandboxd: %s\n", err.msg);
    return 1;
  }
  printf("%s\n", key);
  free(key);
  return 0;
}
