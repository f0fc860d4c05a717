/* resources.h — budgets on what the daemon holds for tenants: retained
 * output memory (overall, per tenant) and daemon fds (per session, per
 * tenant).  See resources.c.  Internal to core. */
#ifndef SBX_CORE_RESOURCES_H
#define SBX_CORE_RESOURCES_H

#include <stdint.h>

#include "common/err.h"

struct sbx_core;

/* Daemon fds charged per object (counted on a running daemon: the pipes,
 * control socket and cancel token each one keeps open). */
#define SBX_RES_FDS_PROCESS 6 /* a background process (exec pipes, ctl, stdin, cancel) */
#define SBX_RES_FDS_WATCH 3   /* a watch: its event pipe, cancel token, connection */
#define SBX_RES_FDS_STREAM 1  /* an output follower's or streamed exec's connection */
#define SBX_RES_FDS_CONTEXT 6 /* a context: its interpreter exec, stdin pipe, wake eventfd */
#define SBX_RES_FDS_EXEC                                                                        \
  5 /* a buffered exec: its pipes, control socket, cancel token, connection */

/* The smallest capture a run or process is given per stream however full the
 * budgets are: enough for a useful head and tail. */
#define SBX_RES_OUTPUT_FLOOR (16 * 1024)

uint64_t sbx_res_output_memory(struct sbx_core *core);
uint64_t sbx_res_output_memory_per_tenant(struct sbx_core *core);
/* Reserves retained output for one process and returns how much: want
 * while the budgets have room for eight times that, then an eighth of what
 * is left, never less than min.  The floor may overshoot a budget by at
 * most min per process, and processes are bounded by the fd budgets. */
uint64_t sbx_res_mem_take(struct sbx_core *core, int64_t tenant, uint64_t want, uint64_t min);
/* Reserves the capture of one run whose two streams each keep up to
 * per_stream bytes (head + tail): sbx_res_mem_take of both streams with
 * SBX_RES_OUTPUT_FLOOR as the floor.  Returns the per-stream cap to run
 * with (per_stream while the budgets have room, less when they do not: the
 * result then keeps a shorter head and tail and counts the rest as dropped);
 * *held is what to give back with sbx_res_mem_give. */
uint64_t sbx_res_output_take(struct sbx_core *core, int64_t tenant, uint64_t per_stream,
                             uint64_t *held);
/* What is left for tenant in both budgets. */
uint64_t sbx_res_mem_room(struct sbx_core *core, int64_t tenant);
void sbx_res_mem_give(int64_t tenant, uint64_t n);
uint64_t sbx_res_mem_of(int64_t tenant);
/* Charges n daemon fds to session sid and its tenant; 429 over either
 * bound.  Give them back with the same tenant and sid. */
int sbx_res_fds_take(struct sbx_core *core, int64_t tenant, const char *sid, unsigned n,
                     struct sbx_error *err);
void sbx_res_fds_give(int64_t tenant, const char *sid, unsigned n);

#endif
