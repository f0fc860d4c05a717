/* status.c — exec status/reason names (DESIGN §4) and cancel tokens. */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/sandbox.h"

static const char *const status_names[] = {
    [SBX_ST_QUEUED] = "queued", [SBX_ST_RUNNING] = "running", [SBX_ST_SUCCEEDED] = "succeeded",
    [SBX_ST_FAILED] = "failed", [SBX_ST_TIMEOUT] = "timeout", [SBX_ST_OOM_KILLED] = "oom_killed",
    [SBX_ST_KILLED] = "killed", [SBX_ST_ERROR] = "error",
};

static const char *const reason_names[] = {
    [SBX_RS_NONE] = "",
    [SBX_RS_EXIT] = "exit",
    [SBX_RS_SIGNAL] = "signal",
    [SBX_RS_TIMEOUT] = "timeout",
    [SBX_RS_MEMORY] = "memory",
    [SBX_RS_PIDS] = "pids",
    [SBX_RS_DISK] = "disk",
    [SBX_RS_OUTPUT] = "output",
    [SBX_RS_CANCELLED] = "cancelled",
    [SBX_RS_SESSION_DELETED] = "session_deleted",
    [SBX_RS_DAEMON_RESTARTED] = "daemon_restarted",
    [SBX_RS_DAEMON_SHUTDOWN] = "daemon_shutdown",
    [SBX_RS_RUNTIME_UNAVAILABLE] = "runtime_unavailable",
    [SBX_RS_SANDBOX_LOST] = "sandbox_lost",
    [SBX_RS_SHEPHERD_LOST] = "shepherd_lost",
    [SBX_RS_NODE_LOST] = "node_lost",
};

const char *sbx_status_name(enum sbx_status s)
{
  if ((unsigned)s >= sizeof status_names / sizeof status_names[0])
    return "error";
  return status_names[s];
}

const char *sbx_reason_name(enum sbx_reason r)
{
  if ((unsigned)r >= sizeof reason_names / sizeof reason_names[0])
    return "";
  return reason_names[r];
}

int sbx_status_parse(const char *s, enum sbx_status *out)
{
  for (unsigned i = 0; s && i < sizeof status_names / sizeof status_names[0]; i++)
    if (!strcmp(s, status_names[i])) {
      *out = (enum sbx_status)i;
      return 0;
    }
  return -1;
}

bool sbx_status_final(enum sbx_status s) { return s != SBX_ST_QUEUED && s != SBX_ST_RUNNING; }

int sbx_cancel_init(struct sbx_cancel *c)
{
  c->why = SBX_RS_NONE;
  c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  return c->efd < 0 ? -1 : 0;
}

/* The eventfd is never read: once fired it stays readable, so every exec
 * sharing the token (and any that starts later) sees it. */
void sbx_cancel_fire(struct sbx_cancel *c, enum sbx_reason why)
{
  if (c->why == SBX_RS_NONE)
    c->why = why;
  uint64_t one = 1;
  if (c->efd >= 0)
    (void)!write(c->efd, &one, sizeof one);
}

void sbx_cancel_destroy(struct sbx_cancel *c)
{
  if (c->efd >= 0)
    close(c->efd);
  c->efd = -1;
}
