/* util.h — small helpers shared by every module: clocks, random ids,
 * fd flags, full reads/writes. */
#ifndef SBX_COMMON_UTIL_H
#define SBX_COMMON_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t sbx_now_ns(void);
uint64_t sbx_now_ms(void);
/* Deadlines are sbx_now_ms() values.  sbx_ms_until: what is left of one,
 * as a poll() timeout (0 once it passed).  sbx_poll_until: poll() of n
 * fds until one is ready or the deadline passes, EINTR retried: > 0
 * ready, 0 timed out, -1 with errno. */
int sbx_ms_until(uint64_t deadline);
struct pollfd;
int sbx_poll_until(struct pollfd *p, unsigned n, uint64_t deadline);
/* Wall clock, seconds since the epoch. */
int64_t sbx_wall_s(void);
/* *ts = now on clock clk plus ms: the absolute deadline a timed wait
 * (pthread_cond_timedwait on that clock) takes. */
void sbx_timespec_in(clockid_t clk, unsigned ms, struct timespec *ts);
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines,
 * so a wall-clock step neither cuts a wait short nor stretches it. */
void sbx_cond_init_monotonic(pthread_cond_t *c);
/* Starts fn(arg) on a detached thread: 0, or pthread_create's error. */
int sbx_thread_detached(void *(*fn)(void *), void *arg);
/* RFC 3339 UTC ("2026-12-02T16:32:00Z") for t (seconds). */
void sbx_format_time(int64_t t, char *buf, size_t len);

/* Random id "<prefix>_<hex>" with 16 random bytes (libsodium). */
void sbx_random_id(const char *prefix, char *buf, size_t len);
/* Fills buf with len random bytes. */
void sbx_random_bytes(void *buf, size_t len);
/* Hex-encodes len bytes of in into out (2*len+1 bytes). */
void sbx_hex(const void *in, size_t len, char *out);

int sbx_set_cloexec(int fd, int on);
int sbx_set_nonblock(int fd, int on);
/* write()/read() until done or a hard error; EINTR retried. */
ssize_t sbx_write_all(int fd, const void *buf, size_t len);
ssize_t sbx_read_all(int fd, void *buf, size_t len);

/* mkdir -p with mode; 0 on success or if it exists. */
int sbx_mkdir_p(const char *path, unsigned mode);
/* rm -rf of a host path owned by the daemon (never a sandbox path). */
int sbx_rm_rf(const char *path);

#endif
