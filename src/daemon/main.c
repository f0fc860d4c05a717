/* main.c — sandboxd's entry point: global flags, then a subcommand
 * (serve, key, routes, audit, db, image, version). */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "common/fault.h"
#include "common/log.h"
#include "daemon/commands.h"
#include "image/image.h"

static void usage(FILE *f)
{
  fprintf(
      f,
      "usage: sandboxd COMMAND [OPTIONS]\n\n"
      "Commands:\n"
      "  serve         run the daemon (HTTP API)\n"
      "  key create    create an API key: --tenant NAME [--admin]\n"
      "  routes        list the HTTP routes\n"
      "  audit verify  check the audit hash chain: [--state-dir DIR | --database URL]\n"
      "  db init       PostgreSQL: migrate and grant: --database APP_URL --owner-url URL\n"
      "  image         OCI images: pull REF | import PATH [--name REF] | build | ls | rm REF |\n"
      "                gc  [--state-dir DIR] (see docs/images.md)\n"
      "  version       print the version\n\n"
      "Options (every command that touches state):\n"
      "  --config FILE           INI config file (see docs/configuration.md)\n"
      "  --listen ADDR           HOST:PORT (default 127.0.0.1:8080; env SANDBOXD_LISTEN)\n"
      "  --state-dir DIR         state directory (env SANDBOXD_STATE_DIR)\n"
      "  --database URL          postgres://… or empty for SQLite (env SANDBOXD_DATABASE_URL)\n"
      "  --log-level LEVEL       debug, info, warn, error\n"
      "  --log-format FMT        auto, text, json\n"
      "  --resolve NAME=ADDR     pin a name for sandboxes' DNS and egress proxy (repeatable;\n"
      "                          env SANDBOXD_RESOLVE=a=1.2.3.4,b=2001:db8::1)\n"
      "  --dns-upstream ADDR[:PORT]\n"
      "                          resolver for allowlisted names (default: pins only)\n"
      "  --net-pool4 CIDR, --net-pool6 CIDR\n"
      "                          veth addresses for allowlisted sandboxes\n"
      "  --pull missing|never    pull images requests name when not stored (default\n"
      "                          missing; env SANDBOXD_PULL)\n"
      "  --max-connections N     open HTTP connections at most (default 4096)\n"
      "  --max-connections-per-client N\n"
      "                          per client IP address (default 64; 0: no limit)\n"
      "  --request-head-timeout S\n"
      "                          seconds a client has to send a request (default 10)\n"
      "  --e2b-templates LIST    E2B templates: NAME=PROFILE[:IMAGE],... (docs/compat/e2b.md)\n"
      "  --enable-unsafe-process-driver\n"
      "                          allow the 'process' driver (no isolation: development only)\n");
}

/* The soft fd limit up to the hard one: the API waits with poll(), so any fd
 * number works, and connections, sessions and their processes all hold fds
 * (a default soft limit of 1024 would be the ceiling select() was).  The
 * sandboxes set their own RLIMIT_NOFILE. */
static void raise_fd_limit(void)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
      perror("sandboxd: raising RLIMIT_NOFILE");
  }
}

/* Settings in order: defaults, --config file, environment, flags. */
static int load_config(struct sbx_config *cfg, int argc, char **argv, int *rest)
{
  struct sbx_error err = {0};
  sbx_config_defaults(cfg);
  for (int i = 0; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--config"))
      snprintf(cfg->config_file, sizeof cfg->config_file, "%s", argv[i + 1]);
  if (sbx_config_load_file(cfg, &err) < 0 || sbx_config_load_env(cfg, &err) < 0) {
    fprintf(stderr, "sandboxd: %s\n", err.msg);
    return -1;
  }
  *rest = 0;
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("sandboxd 0.1.0\n");
    return 0;
  }
  if (!strcmp(cmd, "routes"))
    return sbx_cmd_routes();
  if (!strcmp(cmd, "image")) /* works on the state dir's store directly */
    return sbx_image_main(argc - 1, argv + 1);
  struct sbx_config cfg;
  int rest;
  if (load_config(&cfg, argc, argv, &rest) < 0)
    return 1;
  if (!strcmp(cmd, "key"))
    return sbx_cmd_key(&cfg, argc - 2, argv + 2);
  if (!strcmp(cmd, "db")) /* PostgreSQL setup */
    return sbx_cmd_db(&cfg, argc - 2, argv + 2);
  if (!strcmp(cmd, "audit"))
    return sbx_cmd_audit(&cfg, argc - 2, argv + 2);
  if (!strcmp(cmd, "serve")) {
    for (int i = 2; i < argc; i++) {
      struct sbx_error err = {0};
      int used = sbx_config_flag(&cfg, argc, argv, i, &err);
      if (used <= 0) {
        fprintf(stderr, "sandboxd serve: %s\n", used < 0 ? err.msg : "unknown argument");
        if (used == 0)
          fprintf(stderr, "  (got '%s'; see sandboxd --help)\n", argv[i]);
        return 2;
      }
      i += used - 1;
    }
    raise_fd_limit();
    struct sbx_error err = {0};
    if (sbx_fault_arm_from_env(&err) < 0) { /* before any thread: see fault.h */
      fprintf(stderr, "sandboxd serve: %s\n", err.msg);
      return 2;
    }
    int rc = sbx_cmd_serve(&cfg);
    sbx_config_release(&cfg);
    return rc;
  }
  fprintf(stderr, "sandboxd: unknown command '%s'\n\n", cmd);
  usage(stderr);
  return 2;
}
