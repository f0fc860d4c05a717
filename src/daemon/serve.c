/* serve.c — `sandboxd serve`: takes the state-dir lock, starts the core and
 * the HTTP server, waits for SIGTERM/SIGINT, then shuts down gracefully:
 * stop accepting, end running work (daemon_shutdown), flush the store. */
#include "daemon/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "api/server.h"
#include "common/log.h"
#include "core/core.h"

/* A lock so two daemons never share one state dir.  The fd stays open (and
 * locked) for the life of the process; the kernel drops it at exit, even
 * after kill -9, so a stale lock never blocks a restart. */
static int lock_state_dir(const char *dir, struct sbx_error *err)
{
  char path[4200];
  snprintf(path, sizeof path, "%s/sandboxd.lock", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return sbx_err_sys(err, errno, "opening %s", path);
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    close(fd);
    if (errno == EWOULDBLOCK)
      return sbx_err_set(err, SBX_E_CONFLICT, 0,
                         "another sandboxd is already using the state dir %s", dir);
    return sbx_err_sys(err, errno, "locking %s", path);
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (ftruncate(fd, 0) == 0 && write(fd, pid, (size_t)n) != n)
    sbx_warn("serve", "could not record the pid in %s", path);
  return fd;
}

/* Signals are taken synchronously by the serving thread only: block them
 * before any thread starts so every thread inherits the mask. */
static void block_stop_signals(sigset_t *set)
{
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

/* The core's settings from the daemon's (pointing into cfg); dset, of
 * SBX_CONFIG_DRIVER_SETTINGS entries, holds the driver settings and must
 * live as long as the result. */
static struct sbx_core_config core_config(struct sbx_config *cfg, struct sbx_core_setting *dset)
{
  size_t ndset = sbx_config_driver_settings(cfg, dset, SBX_CONFIG_DRIVER_SETTINGS);
  return (struct sbx_core_config){
      .state_dir = cfg->state_dir,
      .database_url = cfg->database_url,
      .init_path = cfg->init_path,
      .runsc_path = cfg->runsc_path,
      .unsafe_process_driver = cfg->unsafe_process_driver,
      .default_profile = cfg->default_profile,
      .workers = cfg->workers,
      .queue_max = cfg->queue_max,
      .queue_max_per_tenant = cfg->queue_max_per_tenant,
      .workers_per_tenant = cfg->workers_per_tenant,
      .default_ttl_s = cfg->session_ttl_s,
      .max_ttl_s = cfg->session_max_ttl_s,
      .idle_timeout_s = cfg->idle_timeout_s,
      .max_sessions_per_tenant = cfg->max_sessions_per_tenant,
      .profiles = cfg->profiles,
      .nprofiles = cfg->nprofiles,
      .quota = cfg->quota,
      .finops_url = cfg->finops_url,
      .metrics_auth = cfg->metrics_auth,
      .resolve = (const char *const *)cfg->resolve,
      .dns_upstream = cfg->dns_upstream,
      .net_pool4 = cfg->net_pool4,
      .net_pool6 = cfg->net_pool6,
      .image_pull = cfg->image_pull,
      .probe_timeout_s = cfg->probe_timeout_s,
      .probe_wait_s = cfg->probe_wait_s,
      .gvisor_kvm_timeout_s = cfg->gvisor_kvm_timeout_s,
      .gvisor_kvm_off = cfg->gvisor_kvm_off,
      .driver_settings = dset,
      .ndriver_settings = ndset,
      .cluster = cfg->cluster,
      .node_id = cfg->node_id,
      .advertise = cfg->advertise,
      .placement_k = cfg->placement_k,
      .node_slots = cfg->node_slots,
      .node_dead_after_ms = cfg->node_dead_after_ms,
  };
}

/* Serves core over HTTP until SIGTERM or SIGINT, then stops accepting,
 * stops the core and waits for the requests in flight.  -1 (logged) when
 * the server cannot start. */
static int serve_until_signal(const struct sbx_config *cfg, struct sbx_core *core,
                              const sigset_t *set)
{
  struct sbx_server_config sc = {.listen = cfg->listen,
                                 .max_body_bytes = cfg->max_body,
                                 .max_connections = cfg->max_connections,
                                 .max_connections_per_client =
                                     (unsigned)cfg->max_connections_per_client,
                                 .head_timeout_s = (unsigned)cfg->request_head_timeout_s,
                                 .e2b_templates = cfg->e2b_templates,
                                 .cluster_secret_file = cfg->cluster_secret_file};
  struct sbx_server *srv;
  struct sbx_error err = {0};
  if (sbx_server_start(&sc, core, &srv, &err) < 0) {
    sbx_error("serve", "%s", err.msg);
    return -1;
  }
  sbx_info("serve", "sandboxd listening on %s (port %u), state in %s", cfg->listen,
           sbx_server_port(srv), cfg->state_dir);
  int sig = 0;
  while (sigwait(set, &sig) != 0)
    ;
  sbx_info("serve", "received %s: shutting down", strsignal(sig));
  sbx_server_quiesce(srv);
  sbx_core_stop(core);  /* cancels running execs, so blocked handlers return */
  sbx_server_stop(srv); /* waits for in-flight requests, which may use the store */
  return 0;
}

int sbx_cmd_serve(struct sbx_config *cfg)
{
  struct sbx_error err = {0};
  sbx_log_init(cfg->log_level, cfg->log_json);
  if (sbx_config_finish(cfg, &err) < 0) {
    sbx_error("serve", "%s", err.msg);
    return 1;
  }
  int lock_fd = lock_state_dir(cfg->state_dir, &err);
  if (lock_fd < 0) {
    sbx_error("serve", "%s", err.msg);
    return 1;
  }
  sigset_t set;
  block_stop_signals(&set);
  struct sbx_core_setting dset[SBX_CONFIG_DRIVER_SETTINGS];
  struct sbx_core_config cc = core_config(cfg, dset);
  struct sbx_core *core;
  if (sbx_core_start(&cc, &core, &err) < 0) {
    sbx_error("serve", "starting: %s", err.msg);
    close(lock_fd);
    return 1;
  }
  int rc = serve_until_signal(cfg, core, &set);
  sbx_core_stop(core); /* already stopped after a signal: a no-op then */
  sbx_core_free(core);
  if (rc == 0)
    sbx_info("serve", "stopped");
  close(lock_fd);
  return rc < 0 ? 1 : 0;
}
