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
/* Resolves the state dir and opens the configured store; -1 is reported. */
int sbx_cmd_open_store(struct sbx_config *cfg, struct sbx_store_handle *st);

#endif
