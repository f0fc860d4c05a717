/* cmd_routes.c — `sandboxd routes`: prints "METHOD PATTERN" per route, so a
 * test can check that docs/api/openapi.yaml documents exactly these. */
#include "daemon/commands.h"

#include <stdio.h>

#include "api/router.h"

int sbx_cmd_routes(void)
{
  for (const struct sbx_route *r = sbx_routes(); r->method; r++)
    printf("%s %s\n", r->method, r->pattern);
  return 0;
}
