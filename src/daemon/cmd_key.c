/* cmd_key.c — `sandboxd key create --tenant NAME [--admin]`: creates the
 * tenant if needed and prints only the new key on stdout (so scripts can
 * capture it); the key is never stored, only its hash. */
#include "daemon/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "store/store.h"

int sbx_cmd_key(struct sbx_config *cfg, int argc, char **argv)
{
  const char *tenant = NULL;
  bool admin = false;
  if (argc < 1 || strcmp(argv[0], "create") != 0) {
    fprintf(stderr, "usage: sandboxd key create --tenant NAME [--admin] "
                    "[--state-dir DIR | --database URL]\n");
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    int used = sbx_cmd_config_flag(cfg, argc, argv, &i);
    if (used < 0)
      return 2;
    if (used > 0)
      continue;
    if (!strcmp(argv[i], "--tenant") && i + 1 < argc) {
      tenant = argv[++i];
    } else if (!strncmp(argv[i], "--tenant=", 9)) {
      tenant = argv[i] + 9;
    } else if (!strcmp(argv[i], "--admin")) {
      admin = true;
    } else {
      fprintf(stderr, "sandboxd key create: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!tenant) {
    fprintf(stderr, "sandboxd key create: --tenant NAME is required\n");
    return 2;
  }
  struct sbx_store_handle st;
  if (sbx_cmd_open_store(cfg, &st) < 0)
    return 1;
  struct sbx_error err = {0};
  char *key = NULL;
  int rc = sbx_keys_create(&st, tenant, admin, &key, &err);
  sbx_store_close(&st);
  if (rc < 0) {
    fprintf(stderr, "sandboxd: %s\n", err.msg);
    return 1;
  }
  printf("%s\n", key);
  free(key);
  return 0;
}
