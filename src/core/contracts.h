/* contracts.h — the JSON Schema contracts embedded at build time
 * (gen_contracts.py, from contracts/ at the top of the tree): their names
 * and exact bytes.  Static data, nothing to free. */
#ifndef SBX_CORE_CONTRACTS_H
#define SBX_CORE_CONTRACTS_H

#include <stddef.h>

struct sbx_contract_text {
  const char *name; /* "tool-manifest" */
  const char *text; /* the .schema.json file, NUL-terminated */
  size_t len;
};

extern const struct sbx_contract_text sbx_contracts[];
extern const size_t sbx_ncontracts;
extern const char sbx_contract_draft07[]; /* the draft-07 metaschema */

#endif
