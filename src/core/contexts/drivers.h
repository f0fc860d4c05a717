/* drivers.h — the context driver scripts (python_driver.py,
 * node_driver.js), embedded at build time by gen_drivers.py.  Their
 * protocol is described at the top of each script and in core/contexts.c. */
#ifndef SBX_CORE_CONTEXTS_DRIVERS_H
#define SBX_CORE_CONTEXTS_DRIVERS_H

extern const char sbx_ctx_python_driver[];
extern const char sbx_ctx_node_driver[];

#endif
