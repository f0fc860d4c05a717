/* commands.h — sandboxd's subcommands, one file each. */
#ifndef SBX_DAEMON_COMMANDS_H
#define SBX_DAEMON_COMMANDS_H

#include "daemon/config.h"

int sbx_cmd_serve(struct sbx_config *cfg);
int sbx_cmd_key(struct sbx_config *cfg, int argc, char **argv);
int sbx_cmd_routes(void);
/* `sandboxd audit verify` (cmd_audit.c). */
int sbx_cmd_audit(struct sbx_config *cfg, int argc, char **argv);
/* `sandboxd db init` (cmd_db.c): PostgreSQL setup and migration. */
int sbx_cmd_db(struct sbx_config *cfg, int argc, char **argv);

#endif
