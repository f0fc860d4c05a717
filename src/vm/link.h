/* link.h — the byte-stream link between a microVM and the host: the
 * sbx-init protocol (init/proto.h) carried over one virtio-serial port,
 * where no file descriptor can cross.
 *
 * The daemon speaks to a microVM's sbx-init exactly as to a gVisor one: a
 * SOCK_SEQPACKET socket, fd-in forms (init/proto.h "fd-in"), fds passed in
 * with SCM_RIGHTS.  Two relays stand in for the missing fd passing: the
 * host relay (`sbx-vm relay`, a process in the sandbox's cgroup) owns the
 * far end of the daemon's socket and the QEMU chardev socket; the guest
 * relay (PID 1 in the guest, after boot) owns sbx-init's socket and the
 * virtio-serial port.  Every fd the daemon passes becomes a *channel* the
 * host relay opens on the link; the guest relay makes the same kind of
 * object in the guest (pipe, socketpair, memfd) and hands its far end to
 * sbx-init with the message.  Bytes then move as DATA frames.
 *
 * Frames: a struct sbx_link_hdr then `len` payload bytes (len ≤
 * SBX_LINK_MAX_PAYLOAD), little-endian (both ends are x86-64 or the same
 * arch: QEMU runs the host's).
 *
 *   MSG   chan, payload = u32 nchan, nchan × u32 channel ids, datagram.
 *         One datagram on a message channel (chan 0 is sbx-init's main
 *         channel; a CH_SEQ channel is an exec's ctl socket).  The ids are
 *         channels OPENed before, whose guest ends go with the datagram;
 *         only the host sends ids (fd-in: nothing passes fds out).
 *   OPEN  chan (new, host-chosen, ≠ 0), flags = class, payload u64 size
 *         (the file's size for CH_FILE_*, else 0).  Host → guest only.
 *   DATA  chan, bytes.  For CH_IN/CH_OUT/CH_STREAM/CH_SEQ charged to the
 *         receiver's window; for CH_FILE_* bounded by the OPEN size.
 *   EOF   chan: the sender writes no more on it (pipe end closed, socket
 *         half-closed, file content complete).
 *   CLOSE chan: the sender's end is gone entirely; the receiver closes its
 *         end and forgets the id once it has sent its own CLOSE (or at
 *         once when it already has).
 *   CREDIT chan, aux = bytes the receiver has consumed (written to its
 *         local fd) since the last CREDIT: the sender may send that many
 *         more.  Each direction of a channel starts with SBX_LINK_WINDOW.
 *
 * Channel classes (from the host fd's kind; the name says which way the
 * bytes go as the sandbox sees them):
 *   CH_IN       a pipe read end the daemon writes into (exec stdin):
 *               host reads → DATA → guest writes its pipe.
 *   CH_OUT      a pipe write end the daemon reads (stdout, stderr,
 *               READ_TO, WATCH): guest reads its pipe → DATA → host writes.
 *   CH_STREAM   a SOCK_STREAM socket (WRITE_FROM, CONNECT): both ways,
 *               EOF = shutdown(SHUT_WR).
 *   CH_SEQ      a SOCK_SEQPACKET socket (an exec's ctl): MSG both ways.
 *   CH_FILE_IN  a regular file / memfd whose content goes in (EXEC's
 *               payload memfd): OPEN, DATA…, EOF before the MSG naming it.
 *   CH_FILE_OUT a memfd sbx-init fills (LIST, GLOB, STAT, READLINK,
 *               STATFS records): the guest makes a memfd of the size,
 *               and before it forwards sbx-init's reply to that request
 *               it sends the content (DATA…, up to the last non-zero
 *               byte), EOF, CLOSE; the host pwrite()s it into the
 *               daemon's memfd, never past the size.
 *
 * Hostile input: the host relay trusts nothing the guest sends — a frame
 * over the limits, an unknown kind or channel, DATA past a window or a
 * file's size, a MSG carrying ids, a datagram the host cannot deliver —
 * ends the link (the relay exits, the daemon's socket reaches EOF: the
 * sandbox is lost, as when a container's sbx-init dies).  Neither relay
 * ever blocks: every fd is non-blocking, every queue is bounded by the
 * windows, and a guest that stops reading only stops its own channels.
 *
 * This header and link.c are libc only (the guest relay is static). */
#ifndef SBX_VM_LINK_H
#define SBX_VM_LINK_H

#include <stddef.h>
#include <stdint.h>

/* The virtio-serial port's name (QEMU `virtserialport,name=`); the guest
 * finds it under /sys/class/virtio-ports/<vport>/name. */
#define SBX_LINK_PORT_NAME "sbx.link"

enum sbx_link_kind {
  SBX_LINK_MSG = 1,
  SBX_LINK_OPEN = 2,
  SBX_LINK_DATA = 3,
  SBX_LINK_EOF = 4,
  SBX_LINK_CLOSE = 5,
  SBX_LINK_CREDIT = 6,
};

enum sbx_link_class {
  SBX_LINK_CH_IN = 1,
  SBX_LINK_CH_OUT = 2,
  SBX_LINK_CH_STREAM = 3,
  SBX_LINK_CH_SEQ = 4,
  SBX_LINK_CH_FILE_IN = 5,
  SBX_LINK_CH_FILE_OUT = 6,
};

struct sbx_link_hdr {
  uint8_t kind;
  uint8_t flags; /* OPEN: the class; 0 otherwise */
  uint16_t zero; /* must be 0 */
  uint32_t chan;
  uint32_t len; /* payload bytes */
  uint32_t aux; /* CREDIT: bytes; 0 otherwise */
};

/* A request on the main channel (an init/proto.h datagram of this type, no
 * payload) that the guest relay answers itself instead of sbx-init: OK{u64
 * the guest kernel's OOM kills so far (/proc/vmstat oom_kill)}, so the
 * driver can tell an OOM kill inside the guest from any other SIGKILL. */
#define SBX_LINK_MSG_OOM_KILLS 200u

/* Another such request: a guest restored from a saved state takes a fresh
 * identity.  Payload: 32 bytes of seed (credited to the guest's RNG, which
 * is then reseeded), i64 unix time in ns (the clock), str hostname
 * (init/proto.h's str).  → OK{0}, or ERR{errno} for a malformed one. */
#define SBX_LINK_MSG_IDENTITY 201u

/* A datagram (≤ SBX_PROTO_MAX_INLINE + its header) plus the channel list. */
#define SBX_LINK_MAX_PAYLOAD (64u * 1024 + 256)
/* Largest DATA frame either relay sends. */
#define SBX_LINK_DATA_CHUNK (32u * 1024)
/* Bytes each direction of a channel may have in flight, unacknowledged. */
#define SBX_LINK_WINDOW (256u * 1024)
/* Channel ids at once on one link; an OPEN beyond it ends the link. */
#define SBX_LINK_MAX_CHANNELS 1024u
/* fds one MSG may name (as init/proto.h's SBX_PROTO_MAX_FDS). */
#define SBX_LINK_MAX_IDS 8u
/* Largest file channel (init/proto.h's payload and record memfds are smaller;
 * READ_TO uses a pipe, not a file). */
#define SBX_LINK_MAX_FILE (64u * 1024 * 1024)

/* Incremental frame reader over a byte stream: feed it what arrived, take
 * whole frames out.  Checks the header alone (kind known, zero field 0,
 * len ≤ SBX_LINK_MAX_PAYLOAD); what a frame means is the relay's to judge. */
struct sbx_link_reader {
  uint8_t buf[sizeof(struct sbx_link_hdr) + SBX_LINK_MAX_PAYLOAD];
  size_t have;
};

/* Appends up to n bytes of in to the reader; returns how many it took
 * (less than n once it holds a whole frame that was not taken yet). */
size_t sbx_link_feed(struct sbx_link_reader *r, const void *in, size_t n);
/* 1 with the frame's header and payload when a whole frame is held (it is
 * taken: the payload stays valid until the next feed); 0 when more bytes
 * are needed; -1 when the held header is malformed (the link must end). */
int sbx_link_next(struct sbx_link_reader *r, struct sbx_link_hdr *hdr, const uint8_t **payload);

/* Encodes a header into out (16 bytes); the caller appends the payload. */
void sbx_link_put_hdr(uint8_t out[sizeof(struct sbx_link_hdr)], uint8_t kind, uint8_t flags,
                      uint32_t chan, uint32_t len, uint32_t aux);

#endif
