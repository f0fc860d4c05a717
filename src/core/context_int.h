/* context_int.h — what the files of the contexts feature share:
 * context.c (registry, lifecycle, the interpreter thread),
 * context_io.c (the driver protocol: frames out, requests in),
 * context_run.c (a run and its result).
 *
 * A context is one interpreter process inside a session's sandbox running
 * a driver script (core/contexts/).  One thread per context runs it with
 * sbx_sandbox_exec() (stdin: a pipe the daemon keeps writing; stdout: read
 * by the exec's on_output hook) and stays for the context's life: when the
 * interpreter dies (a run's timeout, restart, a crash) the thread waits for
 * a restart or the end.  It holds an exec slot on the session all along, so
 * deleting, expiring or shutting down the session kills the interpreter and
 * ends the context; it holds a session reference until it ends.
 *
 * Locking: ctx->lock guards every field marked (L); the registry lock
 * guards the list and refs; never take the registry lock under ctx->lock. */
#ifndef SBX_CORE_CONTEXT_INT_H
#define SBX_CORE_CONTEXT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"

#define SBX_CTX_NONCE_LEN 32
#define SBX_CTX_MAX_FRAME (48u << 20)  /* a reply (PNGs in base64 included) */
#define SBX_CTX_STRAY_CAP (64u * 1024) /* non-frame output kept per run and stream */
/* A queued chunk is made with room for at least this much, so that a run of
 * tiny frames of one stream (forged ones: the sandbox can read the nonce)
 * fills one chunk instead of allocating one each. */
#define SBX_CTX_CHUNK_MIN 256

/* A piece of a streamed run's output, waiting for its watcher. */
struct sbx_ctx_chunk {
  struct sbx_ctx_chunk *next;
  int stream; /* 1 stdout, 2 stderr */
  size_t len, cap;
  uint64_t cost; /* charged to live_left[stream - 1] beyond the text: header and slack */
  char data[];
};

enum sbx_ctx_state { SBX_CTX_STARTING, SBX_CTX_READY, SBX_CTX_BUSY, SBX_CTX_DEAD };

/* Why the daemon killed the interpreter (so a dying run can say why). */
enum sbx_ctx_kill {
  SBX_CTX_KILL_NONE,
  SBX_CTX_KILL_TIMEOUT,
  SBX_CTX_KILL_RESTART,
  SBX_CTX_KILL_DELETE,
  SBX_CTX_KILL_PROTOCOL,
  SBX_CTX_KILL_QUOTA
};

struct sbx_context {
  char id[40];
  char language[8]; /* "python" | "node" */
  struct sbx_core *core;
  struct sbx_live_session *ls; /* a reference, held by the thread */
  int64_t created_at;
  int refs;                 /* registry lock */
  bool listed;              /* registry lock: in the registry */
  struct sbx_context *next; /* registry lock */

  pthread_mutex_t lock;
  pthread_cond_t cond;               /* (L) any change below */
  enum sbx_ctx_state state;          /* (L) */
  bool want_restart, deleted;        /* (L) */
  enum sbx_ctx_kill kill;            /* (L) set before firing the slot's token */
  struct sbx_exec_slot *slot;        /* (L) the current one, NULL between them */
  int stdin_w;                       /* (L) write end of the interpreter's stdin, or -1 */
  int stdin_r;                       /* (L) its read end until sbx-init has it, or -1 */
  bool ended;                        /* (L) the thread is done: no interpreter will start */
  int wake_fd;                       /* eventfd: restart / delete while dead */
  uint64_t incarnation;              /* (L) interpreters started so far */
  char nonce[SBX_CTX_NONCE_LEN + 1]; /* (L) this interpreter's */
  char dead_why[256];                /* (L) why the last interpreter ended */
  enum sbx_reason dead_reason;       /* (L) */
  bool dead_quota;          /* (L) killed because the CPU quota is used up: reason "quota" */
  uint64_t execution_count; /* (L) runs answered by this interpreter */
  char version[32];         /* (L) the interpreter's, from its hello */

  /* (L) the run in progress */
  uint64_t seq;     /* the request's sequence number */
  json_t *reply;    /* its reply once it came */
  bool proto_error; /* the driver broke the protocol */
  char *frame;      /* pending stdout bytes (a frame being read) */
  size_t frame_len, frame_cap;
  char *stray[2]; /* non-frame stdout / stderr of this run */
  size_t stray_len[2];
  uint64_t stray_dropped[2];
  /* A streamed run (sbx_context_run_watched): its output as it comes, in
   * order, for the run's own thread to hand on; at most live_left[i] more
   * bytes of the driver's progress frames per stream (sandbox output: the
   * daemon bounds it, not the driver).  A queued chunk's cost (its header
   * and unused room) is taken from live_left too while it waits, and given
   * back once delivered, so the queue's memory stays within the budget
   * whatever the frames' sizes. */
  bool live;
  struct sbx_ctx_chunk *live_head, *live_tail;
  uint64_t live_left[2];
};

/* context.c */
void sbx_ctx_unref(struct sbx_context *c);
/* The session's context cid (409 without the contexts capability, 404 if
 * unknown), with a reference; *ls is held too: release both. */
struct sbx_context *sbx_ctx_lookup(struct sbx_core *core, const struct sbx_principal *who,
                                   const char *sid, const char *cid,
                                   struct sbx_live_session **ls, struct sbx_error *err);
/* Waits on c->cond (lock held) until deadline_ms (sbx_now_ms() clock);
 * false once it has passed. */
bool sbx_ctx_wait_locked(struct sbx_context *c, uint64_t deadline_ms);
/* Kills the interpreter for `why` (the slot's token) and wakes the thread;
 * lock held. */
void sbx_ctx_poke_locked(struct sbx_context *c, enum sbx_ctx_kill why);

/* context_io.c */
/* Feeds a chunk of the interpreter's output (stream 1 or 2); lock held. */
void sbx_ctx_feed_locked(struct sbx_context *c, int stream, const char *data, size_t len);
/* Forgets the frame buffer, the run's stray output and its undelivered
 * chunks; lock held. */
void sbx_ctx_reset_run_locked(struct sbx_context *c);
/* Writes one request line to the interpreter's stdin within timeout_ms;
 * lock held.  -1 with err if it is gone or stuck. */
int sbx_ctx_send_locked(struct sbx_context *c, json_t *req, unsigned timeout_ms,
                        struct sbx_error *err);

#endif
