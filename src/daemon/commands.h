/* commands.h — sandboxd's subcommands, one file each. */
#ifndef SBX_DAEMON_COMMANDS_H
#define SBX_DAEMON_COMMANDS_H

#include "daemon/config.h"
#include "store/store.h"

int sbx_cmd_serve(struct sbx_config *cfg);
int sbx_cmd_key(struct sbx_config *cfg, int argc, char **argv);
int sbx_cmd_routes(void);
/* `sandboxd audit verify` (cmd_audit.c). */
int sbx_cmd_audit(struct sbx_config *cfg, int argc, char **argv);
/* `sandboxd db init` (cmd_db.c): PostgreSQL setup and migration. */
int sbx_cmd_db(struct sbx_config *cfg, int argc, char **argv);

/* Consumes the config flag at argv[*i] (advancing *i past its value):
 * 1 if it was one, 0 if not, -1 (reported on stderr) if it was malformed. */
int sbx_cmd_config_flag(struct sbx_config *cfg, int argc, char **argv, int *i);
/* Takes a subcommand's arguments after its verb (argv[0]): the config
 * flags, and the command's own through own(ctx, argc, argv, &i), which
 * returns true when it took argv[i] (advancing i past a value).  Returns 0
 * when every argument was taken, -1 when a config flag was malformed
 * (reported), else the index (> 0) of the first one neither took. */
int sbx_cmd_args(struct sbx_config *cfg, int argc, char **argv,
                 bool (*own)(void *ctx, int argc, char **argv, int *i), void *ctx);
/* Whether argv[*i] is the option name, as "name VALUE" (then *i advances
 * past VALUE) or "name=VALUE"; sets *value. */
bool sbx_cmd_value(const char *name, int argc, char **argv, int *i, const char **value);
/* Resolves the state dir and opens the configured store; -1 is reported. */
int sbx_cmd_open_store(struct sbx_config *cfg, struct sbx_store_handle *st);

#endif
