/* cleanup.h — scope-bound cleanup (crun/bubblewrap habit).
 * `_cleanup_free_ char *p = ...;` frees p when it goes out of scope;
 * steal_pointer()/steal_fd() hand ownership on and leave NULL / -1 behind.
 * Kinds: free, close, fclose, kill (a child), json (json_decref), strv (a
 * NULL-terminated char ** and its strings); buffers in common/buf.h. */
#ifndef SBX_COMMON_CLEANUP_H
#define SBX_COMMON_CLEANUP_H

#include <errno.h>
#include <jansson.h>
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

static inline void sbx_json_decrefp(json_t **j)
{
  if (*j)
    json_decref(*j);
}
static inline void sbx_strv_free(char **v)
{
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}
static inline void sbx_strv_freep(char ***v) { sbx_strv_free(*v); }

#define _cleanup_free_ __attribute__((cleanup(sbx_freep)))
#define _cleanup_close_ __attribute__((cleanup(sbx_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(sbx_fclosep)))
#define _cleanup_kill_ __attribute__((cleanup(sbx_killp)))
#define _cleanup_json_ __attribute__((cleanup(sbx_json_decrefp)))
#define _cleanup_strv_ __attribute__((cleanup(sbx_strv_freep)))

static inline int sbx_steal_fd(int *fd)
{
  int v = *fd;
  *fd = -1;
  return v;
}
/* Type-checked: pp must point to a pointer, and the value has its type. */
#define steal_pointer(pp)                                                                       \
  ({                                                                                            \
    __typeof__(*(pp)) *sbx_pp_ = (pp);                                                          \
    __typeof__(*(pp)) sbx_v_ = *sbx_pp_;                                                        \
    *sbx_pp_ = NULL;                                                                            \
    sbx_v_;                                                                                     \
  })
#define steal_fd(pfd) sbx_steal_fd(pfd)

#endif
