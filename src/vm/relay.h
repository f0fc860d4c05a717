/* relay.h — the two relays of a microVM link (link.h): the host relay
 * between the daemon's SOCK_SEQPACKET socket and QEMU's chardev socket,
 * and the guest relay between sbx-init's socket and the virtio-serial
 * port.  One engine, two sides; libc only. */
#ifndef SBX_VM_RELAY_H
#define SBX_VM_RELAY_H

#include <stdbool.h>

/* Relays between chan_fd (a SOCK_SEQPACKET socket: the daemon's far end on
 * the host, sbx-init's on the guest) and link_fd (a byte stream) until
 * either ends.  Returns 0 when chan_fd or the link reached EOF, 1 when the
 * peer broke the protocol or a resource ran out (why is printed to
 * stderr with prefix "sbx-vm relay: "). */
int sbx_relay_run(int chan_fd, int link_fd, bool host);

#endif
