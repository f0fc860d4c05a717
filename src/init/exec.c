/* exec.c — EXEC on the main channel: validate the request, fork the
 * per-exec shepherd and forget it (its report goes to the daemon on ctl;
 * the SIGCHLD handler in main.c reaps it). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "init/init.h"

static void close_all(int *fds, size_t nfds)
{
  for (size_t i = 0; i < nfds; i++)
    close(fds[i]);
}

static void report_err(int ctl, int e)
{
  int32_t v = e;
  sbx_proto_send(ctl, SBX_MSG_ERR, 0, 0, &v, sizeof v, NULL, 0);
}

void sbxi_exec(const struct sbxi *in, const char *payload, size_t len, int *fds, size_t nfds)
{
  if (nfds != 4) {
    if (nfds >= 4)
      report_err(fds[3], EINVAL);
    close_all(fds, nfds);
    return;
  }
  struct sbx_rbuf r;
  sbx_rbuf_init(&r, payload, payload ? len : 0);
  uint32_t flags = sbx_rbuf_u32(&r);
  const char *cwd = sbx_rbuf_str(&r, SBX_PROTO_MAX_PATH);
  char **argv = sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV);
  char **env = argv ? sbx_rbuf_strv(&r, SBX_PROTO_MAX_STRV) : NULL;
  struct sbxi_pty pty = {.master = -1, .slave = -1};
  if (flags & SBX_PROTO_EXEC_PTY) {
    pty.cols = sbx_rbuf_u32(&r);
    pty.rows = sbx_rbuf_u32(&r);
    if (!pty.cols || !pty.rows || pty.cols > SBX_PROTO_PTY_MAX || pty.rows > SBX_PROTO_PTY_MAX)
      r.bad = true;
  }
  if ((flags & ~SBX_PROTO_EXEC_PTY) || r.off != r.len)
    r.bad = true;
  if (!payload || r.bad || !cwd || !argv || !env || !argv[0] || !sbx_proto_path_ok(cwd)) {
    report_err(fds[3], EINVAL);
    goto out;
  }
  pid_t pid = fork();
  if (pid == 0)
    sbxi_shepherd(in, cwd, argv, env, fds, (flags & SBX_PROTO_EXEC_PTY) ? &pty : NULL);
  if (pid < 0)
    report_err(fds[3], errno);
out:
  free(argv);
  free(env);
  close_all(fds, nfds);
}
