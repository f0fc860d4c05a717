/* config.h — sandboxd's settings: built-in defaults, then the config file
 * (INI, parsed by libinih), then SANDBOXD_* environment variables, then
 * command-line flags; later sources win.  See docs/configuration.md. */
#ifndef SBX_DAEMON_CONFIG_H
#define SBX_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/log.h"
#include "core/profile.h"
#include "core/quota.h"

struct sbx_core_setting; /* core/core.h */

/* Driver settings ([driver] in the config file, SANDBOXD_* in the
 * environment), handed to the drivers in sbx_driver_env. */
#define SBX_CONFIG_DRIVER_KEYS 17
/* ... and image_layer_idmap, a [server] setting the container driver reads */
#define SBX_CONFIG_DRIVER_SETTINGS (SBX_CONFIG_DRIVER_KEYS + 1)

struct sbx_config {
  char listen[256];
  char state_dir[4096]; /* made absolute by sbx_config_finish */
  char database_url[1024];
  char config_file[4096];
  char init_path[4096];
  char runsc_path[4096];
  char default_profile[64];
  enum sbx_log_level log_level;
  int log_json; /* -1 auto */
  uint64_t max_body;
  unsigned workers;
  unsigned queue_max;
  unsigned queue_max_per_tenant; /* one tenant's queued executions */
  unsigned workers_per_tenant;   /* one tenant's running executions; 0: workers-1 */
  int64_t session_ttl_s;
  int64_t session_max_ttl_s;
  int64_t idle_timeout_s;
  unsigned max_sessions_per_tenant;
  /* The HTTP listener's limits against slow and flooding clients. */
  unsigned max_connections;
  int64_t max_connections_per_client; /* 0 = no limit */
  int64_t request_head_timeout_s;     /* 0 = no deadline */
  bool unsafe_process_driver;
  struct sbx_profile profiles[32];
  size_t nprofiles;
  struct sbx_quota_config quota; /* [server] quota_*, rate_limit_*; [tenant.NAME] */
  char finops_url[1024];         /* FinOps endpoint for usage records ("" = none) */
  bool metrics_auth;             /* GET /metrics needs an admin key */
  /* Egress policy */
  char *resolve
      [65]; /* NULL-terminated "NAME=ADDR" pins (--resolve, repeatable; SANDBOXD_RESOLVE a,b) */
  size_t nresolve;
  char dns_upstream[128]; /* "ADDR[:PORT]" ("" = pinned names only) */
  char net_pool4[64];     /* veth addresses ("" = net module default) */
  char net_pool6[64];
  /* Images */
  int image_pull; /* SBX_IMAGE_PULL_MISSING (0, default) or _NEVER (1) */
  /* Start probes run in the background (core/profile.h) */
  unsigned probe_timeout_s;      /* bound of one driver's probe command (10) */
  unsigned probe_wait_s;         /* a request for a probing profile waits this long (5) */
  unsigned gvisor_kvm_timeout_s; /* bound of runsc's KVM probe (2) */
  bool gvisor_kvm_off;           /* gvisor_kvm = off: as if /dev/kvm were absent */
  bool
      image_layer_idmap_off; /* image_layer_idmap = off: shifted layer copies (isolation/shift.c) */
  char e2b_templates[4096]; /* E2B templates → profiles: "NAME=PROFILE[:IMAGE],…" */
  char driver_values[SBX_CONFIG_DRIVER_KEYS][256]; /* "" = unset; see config.c driver_keys */
  /* The fleet (core/fleet.h, docs/fleet.md) */
  bool cluster;
  char node_id[64];
  char advertise[256];            /* http://HOST:PORT other nodes reach this one at */
  char cluster_secret_file[4096]; /* the fleet's shared secret (node-to-node requests) */
  unsigned placement_k;           /* best-of-K (3) */
  int64_t node_slots;             /* sandboxes offered (-1: from the host; 0: none) */
  unsigned node_dead_after_ms;    /* silence before a node is declared dead (6000) */
};

void sbx_config_defaults(struct sbx_config *c);
/* The driver settings that are set, as the drivers get them (pointing
 * into c): how many were written to out (at most max). */
size_t sbx_config_driver_settings(const struct sbx_config *c, struct sbx_core_setting *out,
                                  size_t max);
/* Frees what the settings allocated (the resolve pins). */
void sbx_config_release(struct sbx_config *c);
/* Reads the file (if c->config_file is set). */
int sbx_config_load_file(struct sbx_config *c, struct sbx_error *err);
int sbx_config_load_env(struct sbx_config *c, struct sbx_error *err);
/* One "--flag value" pair (or a boolean flag with value NULL).  Returns the
 * number of argv entries consumed (1 or 2), 0 if not a config flag, -1 on error. */
int sbx_config_flag(struct sbx_config *c, int argc, char **argv, int i, struct sbx_error *err);
/* Creates the state dir (0700) and makes its path absolute. */
int sbx_config_resolve_state(struct sbx_config *c, struct sbx_error *err);
/* Absolute state dir, sbx-init path next to the binary if unset. */
int sbx_config_finish(struct sbx_config *c, struct sbx_error *err);

#endif
