/* probe.h — the probe's shared reporting helpers (probe.c, probe_ext.c):
 * one line per verb, "<verb> OK", "<verb> BLOCKED <ERRNO>" (refused by
 * policy: EPERM, ENOSYS, EACCES, EROFS) or "<verb> FAILED <ERRNO>". */
#ifndef SBX_TESTS_PROBE_H
#define SBX_TESTS_PROBE_H

#include <errno.h>
#include <stdio.h>

static inline const char *ename(int e)
{
  switch (e) {
#define E(x)                                                                                    \
  case x:                                                                                       \
    return #x
    E(EPERM);
    E(ENOSYS);
    E(EACCES);
    E(EROFS);
    E(ENOENT);
    E(ESRCH);
    E(EINVAL);
    E(EBADF);
    E(EFAULT);
    E(ENOSPC);
    E(EAFNOSUPPORT);
    E(ENOTTY);
    E(EEXIST);
    E(ENXIO);
    E(EAGAIN);
    E(ENOMEM);
    E(EDQUOT);
    E(EPROTONOSUPPORT);
    E(ENETUNREACH);
    E(ENOTDIR);
    E(EISDIR);
    E(EBUSY);
    E(ENODEV);
    E(ELOOP);
    E(ECONNREFUSED);
    E(ETXTBSY);
    E(EXDEV);
    E(EOPNOTSUPP);
    E(EMLINK);
    E(ENOTSOCK);
    E(EADDRNOTAVAIL);
    E(EHOSTUNREACH);
    E(ESOCKTNOSUPPORT);
    E(EPIPE);
    E(ECHILD);
#undef E
  default:
    return "E?";
  }
}

static inline void res(const char *verb, long r, int e)
{
  if (r >= 0)
    printf("%s OK\n", verb);
  else if (e == EPERM || e == ENOSYS || e == EACCES || e == EROFS)
    printf("%s BLOCKED %s\n", verb, ename(e));
  else
    printf("%s FAILED %s\n", verb, ename(e));
}
#define TRY(verb, expr)                                                                         \
  do {                                                                                          \
    errno = 0;                                                                                  \
    long r_ = (long)(expr);                                                                     \
    res(verb, r_, errno);                                                                       \
  } while (0)

/* The verbs of probe_ext.c; 1 if v was one of them. */
int probe_ext(const char *v);

#endif
