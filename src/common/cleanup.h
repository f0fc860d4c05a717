/* cleanup.h — scope-bound cleanup (crun/bubblewrap habit).
 * `_cleanup_free_ char *p = ...;` frees p when it goes out of scope;
 * steal_pointer()/steal_fd() hand ownership on and leave NULL / -1 behind. */
#ifndef SBX_COMMON_CLEANUP_H
#define SBX_COMMON_CLEANUP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void sbx_freep(void *p) { free(*(void **)p); }
static inline void sbx_closep(int *fd)
{
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
  }
}
static inline void sbx_fclosep(FILE **f)
{
  if (*f)
    fclose(*f);
}
/* Kill (SIGKILL) and reap a child that is still ours when the scope ends. */
static inline void sbx_killp(pid_t *pid)
{
  if (*pid > 0) {
    int saved = errno;
    kill(*pid, SIGKILL);
    while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
      ;
    errno = saved;
  }
}

#define _cleanup_free_ __attribute__((cleanup(sbx_freep)))
#define _cleanup_close_ __attribute__((cleanup(sbx_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(sbx_fclosep)))
#define _cleanup_kill_ __attribute__((cleanup(sbx_killp)))

static inline void *sbx_steal_ptr(void *pp)
{
  void **p = pp;
  void *v = *p;
  *p = NULL;
  return v;
}
static inline int sbx_steal_fd(int *fd)
{
  int v = *fd;
  *fd = -1;
  return v;
}
#define steal_pointer(pp) sbx_steal_ptr(pp)
#define steal_fd(pfd) sbx_steal_fd(pfd)

#endif
