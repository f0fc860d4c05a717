/* net.c — the sandbox's network: its own network namespace (made by
 * clone) with only the loopback interface up.  No routes, no egress, and
 * the host's abstract unix sockets are unreachable because they are scoped
 * per network namespace (CVE-2020-15257).  Egress policy is another
 * module's job.  Brought up with an ioctl, no shelling out; child-side. */
#include "isolation/iso.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int sbx_net_lo_up(void)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, "lo", 3);
  int r = ioctl(s, SIOCGIFFLAGS, &ifr);
  if (r == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int e = errno;
  close(s);
  errno = e;
  return r;
}
