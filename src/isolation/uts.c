/* uts.c — the sandbox's UTS namespace: hostname "sandbox", so nothing of
 * the host's name leaks (isolation.md §3 attack 30).  Child-side. */
#include "isolation/iso.h"

#include <unistd.h>

int sbx_uts_set_hostname(void)
{
  if (sethostname("sandbox", 7) < 0)
    return -1;
  return setdomainname("(none)", 6);
}
