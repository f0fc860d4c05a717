/* cmd_db.c — `sandboxd db init --database APP_URL --owner-url OWNER_URL`:
 * prepares a PostgreSQL database for sandboxd, and migrates it on upgrade.
 * Connects as the schema owner, applies the pending migrations under an
 * advisory lock, and grants the daemon's role (the one in --database) what
 * it needs.  The daemon itself never migrates PostgreSQL: it runs as a
 * role that owns nothing (docs/postgres.md).  Neither URL is ever printed. */
#include "daemon/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/postgres/pg.h"

static int usage(void)
{
  fprintf(stderr, "usage: sandboxd db init --database postgres://APP_ROLE@HOST/DB "
                  "--owner-url postgres://OWNER_ROLE@HOST/DB\n"
                  "  (or env SANDBOXD_DATABASE_URL and SANDBOXD_DATABASE_OWNER_URL)\n");
  return 2;
}

static bool is_pg(const char *url)
{
  return !strncasecmp(url, "postgres://", 11) || !strncasecmp(url, "postgresql://", 13);
}

static bool db_arg(void *ctx, int argc, char **argv, int *i)
{
  return sbx_cmd_value("--owner-url", argc, argv, i, ctx);
}

int sbx_cmd_db(struct sbx_config *cfg, int argc, char **argv)
{
  const char *owner = getenv("SANDBOXD_DATABASE_OWNER_URL");
  if (argc < 1 || strcmp(argv[0], "init") != 0)
    return usage();
  int bad = sbx_cmd_args(cfg, argc, argv, db_arg, &owner);
  if (bad)
    return bad < 0 ? 2 : usage();
  if (!is_pg(cfg->database_url) || !owner || !is_pg(owner)) {
    fprintf(stderr, "sandboxd db init: --database and --owner-url must both be postgres:// URLs "
                    "(SQLite needs no init: the daemon migrates it)\n");
    return 2;
  }
  struct sbx_error err = {0};
  if (sbx_store_pg_init(cfg->database_url, owner, &err) < 0) {
    fprintf(stderr, "sandboxd db init: %s\n", err.msg);
    return 1;
  }
  fprintf(stderr, "sandboxd db init: schema up to date, application role granted\n");
  return 0;
}
