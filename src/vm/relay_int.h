/* relay_int.h — the relay engine's state, shared by relay.c (the engine:
 * frames, windows, the poll loop) and the two sides' files (relay_host.c:
 * what the daemon's fds are; relay_guest.c: making the same objects for
 * sbx-init).  Internal to the vm module. */
#ifndef SBX_VM_RELAY_INT_H
#define SBX_VM_RELAY_INT_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/link.h"

/* A byte queue: bytes from off to off+len are pending. */
struct bq {
  uint8_t *p;
  size_t off, len, cap;
};

struct chan {
  bool used;
  uint8_t klass; /* SBX_LINK_CH_*; 0 for the main channel (id 0) */
  int fd;        /* the local end, -1 once closed */
  int far;       /* guest: the end sbx-init gets, until forwarded */
  bool rd_done;  /* nothing (more) to read from fd */
  bool wr_done;  /* nothing (more) to write to fd */
  bool peer_eof; /* the peer sends no more */
  bool sent_close, got_close;
  uint32_t send_avail; /* bytes this side may still send the peer */
  uint32_t recv_avail; /* bytes the peer may still send this side */
  uint32_t consumed;   /* written to fd since the last CREDIT */
  struct bq q;         /* from the peer, not yet written to fd (message
                          channels: records, see relay.c) */
  uint64_t size, off;  /* CH_FILE_*: the size, bytes moved so far */
  uint32_t req_id;     /* guest CH_FILE_OUT: the request whose reply flushes it */
  bool has_req;
};

struct relay {
  bool host;
  int link;
  struct bq out; /* frames not yet written to the link */
  struct chan ch[SBX_LINK_MAX_CHANNELS];
  uint32_t next_id;
  const char *fail;        /* set: the link ends with this reason */
  int vmstat_fd;           /* guest: /proc/vmstat, opened before any workload ran */
  int pressure_fd;         /* guest: /proc/pressure/memory with a trigger armed, or -1 */
  uint64_t pressure_kills; /* guest: workloads killed for memory stalls */
  uint64_t kernel_kills;   /* guest: the kernel's oom_kill count last seen */
  pid_t pressure_victim;   /* guest: the last workload killed for a stall */
  struct sbx_link_reader rd;
};

/* relay.c.  new/input/free are the engine without its loop (the fuzz
 * harness feeds link bytes straight in): chan_fd becomes channel 0. */
struct relay *sbx_relay_new(int chan_fd, int link_fd, bool host);
void sbx_relay_input(struct relay *r, const uint8_t *buf, size_t n);
void sbx_relay_free(struct relay *r);
int sbx_relay_emit(struct relay *r, uint8_t kind, uint8_t flags, uint32_t chan, const void *p,
                   size_t n, uint32_t aux);
void sbx_relay_fail(struct relay *r, const char *why);
struct chan *sbx_relay_chan_init(struct relay *r, uint32_t id, uint8_t klass, int fd);
void sbx_relay_settle(struct relay *r, struct chan *c);
int sbx_bq_put(struct bq *q, const void *d, size_t n);
void sbx_bq_drop(struct bq *q, size_t n);
void sbx_bq_free(struct bq *q);
/* A local message record on a message channel's queue: u32 len, u32
 * nids, nids × u32 ids, datagram (len counts everything after len). */
int sbx_relay_queue_msg(struct chan *c, const uint32_t *ids, uint32_t nids, const void *dgram,
                        size_t n);

/* relay_host.c: a datagram the daemon sent on channel c (fds received with
 * it) → OPEN frames for the fds and the MSG; 0, or -1 with r->fail. */
int sbx_relay_host_msg(struct relay *r, struct chan *c, const uint8_t *dgram, size_t n, int *fds,
                       size_t nfds);
/* relay_guest.c: OPEN from the host → the local object (0 / -1 + fail). */
int sbx_relay_guest_open(struct relay *r, uint32_t id, uint8_t klass, uint64_t size);
/* relay_guest.c: a request the guest relay answers itself
 * (SBX_LINK_MSG_OOM_KILLS): true when dgram was one (answered or, without
 * room in the window, dropped). */
bool sbx_relay_guest_answer(struct relay *r, const uint8_t *dgram, size_t n);
/* relay_guest.c: arms the memory-stall trigger (pressure_fd); and when it
 * fires, kills the biggest workload process, counted as an OOM kill. */
void sbx_relay_guest_pressure_arm(struct relay *r);
void sbx_relay_guest_pressure(struct relay *r);
/* relay_guest.c: before sbx-init's datagram with request id `id` goes up,
 * the CH_FILE_OUT contents that request was waiting for. */
void sbx_relay_guest_flush_files(struct relay *r, uint32_t id);

#endif
