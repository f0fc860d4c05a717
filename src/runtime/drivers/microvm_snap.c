/* microvm_snap.c — saved guest states: QMP, the one QEMU interface that
 * can pause a guest, write its whole state to a file and resume a copy.
 *
 * A golden state is a guest booted up to sbx-init's READY and then saved
 * paused; a restore starts QEMU on the same machine with `-incoming fd:`
 * and resumes it (microvm.c gives it a fresh identity right after).  QMP
 * speaks one JSON object per line; replies carry "return" or "error",
 * and asynchronous events in between are skipped.  The monitor is a
 * socketpair end, so only the daemon can talk to it. */
#include "runtime/drivers/microvm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fdpass.h"
#include "common/util.h"

#define SAVE_MS 60000 /* a 512 MiB guest writes ~100 MB under TCG in ~1 s */

static int send_cmd(int fd, const char *cmd, int pass_fd)
{
  struct iovec iov = {(void *)cmd, strlen(cmd)};
  return sbx_sendmsg_fds(fd, &iov, 1, &pass_fd, pass_fd >= 0 ? 1 : 0, 0) == (ssize_t)iov.iov_len
             ? 0
             : -1;
}

/* Reads lines until one answers (has "return" or "error"); it goes to
 * reply.  0 "return", 1 "error", -1 closed or late. */
static int read_answer(int fd, char *reply, size_t len, uint64_t deadline)
{
  char buf[8192];
  size_t have = 0;
  for (;;) {
    char *nl;
    while ((nl = memchr(buf, '\n', have)) != NULL) {
      *nl = '\0';
      bool ret = strstr(buf, "\"return\"") != NULL, bad = strstr(buf, "\"error\"") != NULL;
      if (ret || bad) {
        snprintf(reply, len, "%s", buf);
        return bad ? 1 : 0;
      }
      size_t used = (size_t)(nl - buf) + 1;
      memmove(buf, nl + 1, have - used);
      have -= used;
    }
    uint64_t now = sbx_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (now >= deadline || have == sizeof buf - 1 || poll(&p, 1, (int)(deadline - now)) <= 0)
      return -1;
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0)
      return -1;
    have += (size_t)n;
  }
}

int sbx_mv_qmp(int qmp_fd, const char *cmd, int fd, char *reply, size_t len, unsigned timeout_ms,
               struct sbx_error *err)
{
  char line[1024];
  snprintf(line, sizeof line, "%s\n", cmd);
  if (send_cmd(qmp_fd, line, fd) < 0)
    return sbx_err_sys(err, errno, "microvm: qmp");
  int r = read_answer(qmp_fd, reply, len, sbx_now_ms() + timeout_ms);
  if (r < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "microvm: qmp: no answer to %.60s",
                       cmd);
  if (r > 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "microvm: qmp: %.150s", reply);
  return 0;
}

/* The greeting is a line of its own; capabilities negotiation ends it. */
static int qmp_open(int qmp_fd, struct sbx_error *err)
{
  char reply[512];
  return sbx_mv_qmp(qmp_fd, "{\"execute\":\"qmp_capabilities\"}", -1, reply, sizeof reply, 10000,
                    err);
}

/* Polls a query until its reply has want (or a failure word) in it. */
static int wait_for(int qmp_fd, const char *query, const char *want, unsigned timeout_ms,
                    struct sbx_error *err)
{
  char reply[2048];
  uint64_t deadline = sbx_now_ms() + timeout_ms;
  while (sbx_now_ms() < deadline) {
    if (sbx_mv_qmp(qmp_fd, query, -1, reply, sizeof reply, 5000, err) < 0)
      return -1;
    if (strstr(reply, want))
      return 0;
    if (strstr(reply, "\"failed\"") || strstr(reply, "\"internal-error\""))
      return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "microvm: %.150s", reply);
    usleep(5000);
  }
  return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, ETIMEDOUT, "microvm: %s not %s in %u ms",
                     query, want, timeout_ms);
}

int sbx_mv_save(int qmp_fd, const char *path, struct sbx_error *err)
{
  char reply[512];
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "microvm: open %s", path);
  if (qmp_open(qmp_fd, err) < 0 ||
      sbx_mv_qmp(qmp_fd, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"state\"}}", fd,
                 reply, sizeof reply, 5000, err) < 0 ||
      sbx_mv_qmp(qmp_fd, "{\"execute\":\"stop\"}", -1, reply, sizeof reply, 5000, err) < 0 ||
      sbx_mv_qmp(qmp_fd, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:state\"}}", -1,
                 reply, sizeof reply, 5000, err) < 0)
    return -1;
  return wait_for(qmp_fd, "{\"execute\":\"query-migrate\"}", "\"completed\"", SAVE_MS, err);
}

int sbx_mv_resume(int qmp_fd, struct sbx_error *err)
{
  char reply[512];
  /* With -incoming the state loads before QEMU runs anything; the guest
   * was saved paused, so it stays paused until cont. */
  if (qmp_open(qmp_fd, err) < 0 || wait_for(qmp_fd, "{\"execute\":\"query-status\"}",
                                            "\"status\": \"paused\"", 30000, err) < 0)
    return -1;
  return sbx_mv_qmp(qmp_fd, "{\"execute\":\"cont\"}", -1, reply, sizeof reply, 5000, err);
}
