/* pid.c — process-level attributes of the sandbox's first process (PID 1
 * of its pid namespace, made by clone): a new session, so it has no
 * controlling terminal and TIOCSTI into the daemon's tty is impossible
 * (CVE-2017-5226); and die-with-parent.  PR_SET_PDEATHSIG follows the
 * *thread* that forked, which is why spawn.c forks from one long-lived
 * spawner thread; it is also cleared by any credential change, so the
 * chain sets it again after dropping to the sandbox user.  Child-side. */
#include "isolation/iso.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int sbx_pid_setsid(void) { return setsid() < 0 ? -1 : 0; }

/* Ignored signals and the blocked mask survive execve: whatever the daemon
 * ignores (SIGPIPE…) or blocks on its spawner thread must not reach the
 * sandbox's processes. */
int sbx_pid_reset_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction(sig, &sa, NULL); /* EINVAL for glibc-reserved ones: fine */
  sigset_t none;
  sigemptyset(&none);
  return sigprocmask(SIG_SETMASK, &none, NULL);
}

int sbx_pid_deathsig(void)
{
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    return -1;
  /* PID 1 of a new pid namespace sees getppid() == 0 whatever happens, so
   * the usual re-check of getppid() cannot close the race; the parent
   * thread is blocked waiting for us until exec, so it cannot have died. */
  return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
