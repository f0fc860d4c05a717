/* pagination.c — see pagination.h. */
#include "api/pagination.h"

#include <stdlib.h>
#include <string.h>

int sbx_api_page(struct sbx_req *r, int *limit, const char **cursor, struct sbx_error *err)
{
  const char *l = sbx_req_query(r, "limit");
  *limit = 50;
  if (l) {
    char *end;
    long v = strtol(l, &end, 10);
    if (*end || end == l || v < 1 || v > 200) {
      sbx_err_field(err, "limit", "limit must be an integer from 1 to 200");
      return sbx_err_fr(err, "Requête invalide : limit doit être un entier de 1 à 200");
    }
    *limit = (int)v;
  }
  *cursor = sbx_req_query(r, "cursor");
  if (*cursor && strlen(*cursor) >= 64) {
    sbx_err_field(err, "cursor", "cursor is not valid");
    return sbx_err_fr(err, "Requête invalide : curseur non valide");
  }
  return 0;
}
