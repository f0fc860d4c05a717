/* container.c — the `container` driver: shared-kernel isolation.
 *
 * A sandbox is an sbx-init (PID 1 of its own user, mount, pid, net, ipc,
 * uts and cgroup namespaces) behind the wall built by src/isolation/ —
 * see isolation/iso.h for the split between daemon and child and
 * isolation/chain.c for the ordered steps.  sbx-init is exec'd from a
 * sealed memfd copy (CVE-2019-5736) with the daemon channel as fd 3.
 *
 * create() takes a pre-built sandbox from the warm pool when one matches
 * (profile, disk size) and applies the request's memory/pids/cpu limits to
 * its cgroup; otherwise it builds one cold.  An image sandbox (spec->layers,
 * resolved by the core) has the image's layers as a copy-on-write root
 * (isolation/overlay.c) and is always built cold: the pool holds host-pack
 * sandboxes only, so one is never handed out for an image request and a
 * pool never pins an image's layers against the store's GC.  destroy() freezes and kills
 * the whole cgroup, reaps sbx-init, removes the cgroup and closes the
 * channel: processes die with the pid namespace, mounts with the mount
 * namespace, the netns with its last process.
 *
 * The wasm driver (wasm.c) builds the same sandboxes with an engine in
 * them (container_int.h): sbx-init gets the engine's argv and the runner's
 * script as its stdin, and a profile registered with an engine has its
 * pooled sandboxes built that way too. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sodium.h>

#include "common/log.h"
#include "common/util.h"
#include "init/launch.h"
#include "isolation/iso.h"
#include "isolation/pool.h"
#include "runtime/driver.h"
#include "runtime/drivers/container_int.h"
#include "runtime/drivers/iso_limits.h"
#include "runtime/sandbox.h"

#define HANDSHAKE_MS 5000

/* Idle pool entries are capped until hand-over sets the request's limits;
 * after the first hand-over they are built with the memory and CPU limits
 * of the last request served from the pool (pool_like), so that a run of
 * alike requests (a profile's defaults, usually) finds them already set
 * and the hand-over writes no cgroup file for them. */
#define POOL_IDLE_MEMORY (256ull << 20)
/* Idle pool entries get the largest pids limit (cgroup and RLIMIT_NPROC):
 * at hand-over both are lowered to the request's, and lowering an rlimit
 * needs no privilege while raising one needs CAP_SYS_RESOURCE, which root
 * may lack (containers, some VMs).  Nothing runs in an idle entry but
 * sbx-init and one idle shepherd (forked at build, so that the first exec
 * after the hand-over does not wait for a fork), and nobody can reach
 * either before the hand-over sets the limits on both. */
#define POOL_IDLE_PIDS 16384

static int init_memfd = -1;

/* Profiles whose sandboxes run an engine (registered by the wasm driver). */
#define ENGINE_PROFILES 16
static struct {
  char profile[64];
  const struct sbx_ctr_engine *engine;
} engines[ENGINE_PROFILES];
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;

struct ctr_priv {
  struct sbx_iso_box *box;
  bool pooled;
};

void sbx_ctr_engine_profile(const char *profile, const struct sbx_ctr_engine *engine)
{
  pthread_mutex_lock(&engines_lock);
  size_t i = 0;
  while (i < ENGINE_PROFILES && engines[i].engine && strcmp(engines[i].profile, profile) != 0)
    i++;
  if (i < ENGINE_PROFILES) {
    snprintf(engines[i].profile, sizeof engines[i].profile, "%s", profile);
    engines[i].engine = engine;
  }
  pthread_mutex_unlock(&engines_lock);
}

static const struct sbx_ctr_engine *engine_of(const char *profile)
{
  const struct sbx_ctr_engine *e = NULL;
  pthread_mutex_lock(&engines_lock);
  for (size_t i = 0; i < ENGINE_PROFILES && engines[i].engine && !e; i++)
    if (strcmp(engines[i].profile, profile) == 0)
      e = engines[i].engine;
  pthread_mutex_unlock(&engines_lock);
  return e;
}

/* image: the request's (its layers and User; NULL for the host pack);
 * engine: what sbx-init also runs (NULL: nothing). */
static int build_box(const char *leaf, const struct sbx_limits *lim,
                     const struct sbx_sandbox_spec *image, const struct sbx_ctr_engine *engine,
                     struct sbx_iso_box **out, struct sbx_error *err)
{
  struct sbx_iso_spec spec = {.leaf = leaf,
                              .limits = sbx_drv_iso_limits(lim),
                              .exec_fd = init_memfd,
                              .argv = engine ? engine->init_argv : NULL,
                              .stdio = {engine ? engine->stdin_fd : -1, -1, -1}};
  if (image) {
    spec.layers = image->layers;
    spec.nlayers = image->nlayers;
    spec.run_uid = image->run_uid;
    spec.run_gid = image->run_gid;
  }
  struct sbx_iso_box *box;
  if (sbx_iso_box_create(&spec, &box, err) < 0)
    return -1;
  if (sbx_init_handshake(box->chan_fd, HANDSHAKE_MS, err) < 0) {
    sbx_err_prefix(err, "container %s", leaf);
    sbx_iso_box_destroy(box);
    return -1;
  }
  *out = box;
  return 0;
}

static pthread_mutex_t pool_like_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sbx_limits pool_like = {.memory_bytes = POOL_IDLE_MEMORY};

static int build_pooled(const char *leaf, const char *profile, uint64_t disk,
                        struct sbx_iso_box **out, struct sbx_error *err)
{
  pthread_mutex_lock(&pool_like_lock);
  struct sbx_limits lim = {.memory_bytes = pool_like.memory_bytes,
                           .cpu_millis = pool_like.cpu_millis,
                           .pids = POOL_IDLE_PIDS,
                           .disk_bytes = disk};
  pthread_mutex_unlock(&pool_like_lock);
  if (build_box(leaf, &lim, NULL, engine_of(profile), out, err) < 0)
    return -1;
  if (sbx_init_herd((*out)->chan_fd, HANDSHAKE_MS, err) < 0) {
    sbx_err_prefix(err, "container %s", leaf);
    sbx_iso_box_destroy(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

/* The isolation primitives' host settings, from the daemon's driver
 * settings (docs/configuration.md); unset ones keep their defaults. */
static void configure(const struct sbx_driver_env *env)
{
  /* One cgroup parent per daemon instance (per state dir), so that one
   * daemon's recovery never removes another daemon's sandboxes. */
  const char *parent = sbx_driver_setting(env, "cgroup_parent");
  unsigned char h[8];
  char name[40], hex[17];
  crypto_generichash(h, sizeof h, (const unsigned char *)env->state_dir, strlen(env->state_dir),
                     NULL, 0);
  sbx_hex(h, sizeof h, hex);
  snprintf(name, sizeof name, "sandboxd-%s", hex);
  sbx_cg_set_default_parent(parent && *parent ? parent : name);
  if (sbx_driver_setting(env, "uid_base") || sbx_driver_setting(env, "uid_slots"))
    sbx_userns_configure((uid_t)sbx_driver_setting_uint(env, "uid_base", 200000, UINT32_MAX - 1),
                         sbx_driver_setting_uint(env, "uid_slots", 1024, 4096));
  if (sbx_driver_setting(env, "container_pool_size"))
    sbx_container_pool_configure(sbx_driver_setting_uint(env, "container_pool_size", 2, 64));
  sbx_overlay_set_form(sbx_driver_setting(env, "overlay_layers"));
  const char *idmap = sbx_driver_setting(env, "image_layer_idmap");
  sbx_overlay_set_layer_idmap(!idmap || strcmp(idmap, "off") != 0);
}

static int setup_once(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  struct sbx_error err = {0};
  if (!env || !env->init_path || !env->state_dir) {
    snprintf(why, whylen, "no sbx-init path or state dir");
    return -1;
  }
  configure(env);
  if (sbx_iso_init(&err) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  if (init_memfd < 0 && (init_memfd = sbx_init_memfd(env->init_path, &err)) < 0) {
    snprintf(why, whylen, "sbx-init: %s", err.msg);
    return -1;
  }
  if (sbx_pool_start(build_pooled, &err) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  return 0;
}

/* Both drivers probe it (in their own threads): the first does the work,
 * the other gets the same verdict. */
int sbx_ctr_setup(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static int done = 0, rc = -1;
  static char reason[256];
  pthread_mutex_lock(&lock);
  if (!done) {
    rc = setup_once(env, reason, sizeof reason);
    done = 1;
  }
  snprintf(why, whylen, "%s", rc < 0 ? reason : "");
  pthread_mutex_unlock(&lock);
  return rc;
}

static int ctr_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  return sbx_ctr_setup(env, why, whylen);
}

void sbx_ctr_prewarm(const char *profile, const struct sbx_limits *limits)
{
  sbx_pool_want(profile, limits->disk_bytes ? limits->disk_bytes : SBX_ISO_DEFAULT_DISK);
}

unsigned sbx_ctr_pool_idle(const char *profile, const struct sbx_limits *limits)
{
  return sbx_pool_idle(profile, limits->disk_bytes ? limits->disk_bytes : SBX_ISO_DEFAULT_DISK);
}

static bool is_host_image(const char *image)
{
  return !image || !*image || !strcmp(image, "host");
}

/* The host pack, or an image the core has resolved to its unpacked layers
 * (absolute dirs from the image store; this driver only mounts them). */
static int check_image(const struct sbx_sandbox_spec *spec, struct sbx_error *err)
{
  if (spec->nlayers == 0)
    return is_host_image(spec->image)
               ? 0
               : sbx_err_field(err, "image", "image '%.200s' was not resolved to layers",
                               spec->image);
  if (!spec->layers || spec->nlayers > SBX_ISO_MAX_LAYERS)
    return sbx_err_field(err, "image", "an image has 1 to %d layers here, not %zu",
                         SBX_ISO_MAX_LAYERS, spec->nlayers);
  for (size_t i = 0; i < spec->nlayers; i++)
    if (!spec->layers[i] || spec->layers[i][0] != '/')
      return sbx_err_set(err, SBX_E_INTERNAL, EINVAL, "image layer %zu is not an absolute path",
                         i);
  return 0;
}

struct nproc_lowering {
  struct rlimit rl;
  int failed; /* an errno; 0 while every call succeeded */
};

static bool lower_nproc(pid_t pid, void *ctx)
{
  struct nproc_lowering *l = ctx;
  if (prlimit(pid, RLIMIT_NPROC, &l->rl, NULL) == 0 || errno == ESRCH) /* ESRCH: it ended */
    return true;
  l->failed = errno;
  return false;
}

static struct sbx_iso_box *take_pooled(const struct sbx_sandbox_spec *spec, uint64_t disk)
{
  struct sbx_iso_box *box = sbx_pool_take(spec->profile, disk);
  if (!box)
    return NULL;
  struct sbx_error err = {0};
  struct sbx_iso_limits lim = sbx_drv_iso_limits(&spec->limits);
  lim.disk_bytes = disk;
  if (sbx_cg_set_limits(&box->cg, &lim, &err) < 0) {
    /* e.g. a memory limit below what the idle sandbox already uses */
    sbx_warn("container", "pooled sandbox rejected the limits (%s); building cold", err.msg);
    sbx_iso_box_destroy(box);
    return NULL;
  }
  /* Lower RLIMIT_NPROC from the idle entry's maximum to the request's pids
   * limit (as sbx_iso_plan_fill sets it for a cold sandbox) on sbx-init
   * first, whose later forks inherit it, then on what it forked before:
   * its idle shepherd, whose workloads inherit it.  The build waited for
   * that fork, and nothing else forks in an idle entry. */
  rlim_t n = lim.pids ? (rlim_t)lim.pids : 16384;
  struct nproc_lowering l = {.rl = {n, n}};
  if (prlimit(box->pid, RLIMIT_NPROC, &l.rl, NULL) < 0)
    l.failed = errno;
  else if (sbx_cg_each_proc(&box->cg, lower_nproc, &l) < 1 && !l.failed)
    l.failed = ENOENT; /* not even sbx-init listed: the cgroup cannot be read */
  if (l.failed) {
    sbx_warn("container", "pooled sandbox: prlimit(NPROC): %s; building cold",
             strerror(l.failed));
    sbx_iso_box_destroy(box);
    return NULL;
  }
  pthread_mutex_lock(&pool_like_lock);
  pool_like.memory_bytes = spec->limits.memory_bytes;
  pool_like.cpu_millis = spec->limits.cpu_millis;
  pthread_mutex_unlock(&pool_like_lock);
  return box;
}

int sbx_ctr_create(const struct sbx_driver *drv, const struct sbx_sandbox_spec *spec,
                   const struct sbx_ctr_engine *engine, struct sbx_sandbox **out,
                   struct sbx_error *err)
{
  if (init_memfd < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "container driver not probed");
  if (check_image(spec, err) < 0)
    return -1;
  uint64_t disk = spec->limits.disk_bytes ? spec->limits.disk_bytes : SBX_ISO_DEFAULT_DISK;
  struct ctr_priv *priv = calloc(1, sizeof *priv);
  if (!priv)
    return sbx_err_sys(err, ENOMEM, "container");
  /* Images (and their User) always start cold: a pooled sandbox is the
   * host pack, as the sandbox user. */
  priv->box = spec->nlayers || spec->run_uid ? NULL : take_pooled(spec, disk);
  priv->pooled = priv->box != NULL;
  if (!priv->box) {
    struct sbx_limits lim = spec->limits;
    lim.disk_bytes = disk;
    if (build_box(spec->id, &lim, spec, engine, &priv->box, err) < 0) {
      free(priv);
      return -1;
    }
  }
  struct sbx_sandbox *sb = sbx_sandbox_alloc(drv, spec);
  if (!sb) {
    sbx_iso_box_destroy(priv->box);
    free(priv);
    return sbx_err_sys(err, ENOMEM, "container");
  }
  sb->init_fd = priv->box->chan_fd;
  priv->box->chan_fd = -1; /* the sandbox owns the channel now */
  if (!priv->pooled)       /* a pooled one has its shepherd from the build */
    sbx_sandbox_herd(sb);
  sb->init_pid = priv->box->pid;
  sb->limits.disk_bytes = disk;
  snprintf(sb->root_desc, sizeof sb->root_desc, "/ (container %.40s%s)", priv->box->leaf,
           spec->nlayers ? ", image" : "");
  sb->priv = priv;
  *out = sb;
  return 0;
}

static int ctr_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                      struct sbx_error *err)
{
  return sbx_ctr_create(&sbx_drv_container, spec, NULL, out, err);
}

void sbx_ctr_destroy(struct sbx_sandbox *sb)
{
  if (!sb)
    return;
  struct ctr_priv *priv = sb->priv;
  if (priv) {
    sbx_iso_box_destroy(priv->box); /* freezer-kill, reap, rmdir */
    free(priv);
  }
  sb->priv = NULL;
  sbx_sandbox_free(sb); /* closes the channel */
}

int sbx_ctr_usage(struct sbx_sandbox *sb, struct sbx_usage *out)
{
  struct ctr_priv *priv = sb->priv;
  if (!priv || !priv->box)
    return -1;
  return sbx_drv_cg_usage(&priv->box->cg, out);
}

int sbx_ctr_memory(struct sbx_sandbox *sb, struct sbx_memory *out)
{
  struct ctr_priv *priv = sb->priv;
  if (!priv || !priv->box)
    return -1;
  return sbx_drv_cg_memory(&priv->box->cg, out);
}

int sbx_ctr_oom_kills(struct sbx_sandbox *sb, uint64_t *out)
{
  struct ctr_priv *priv = sb->priv;
  if (!priv || !priv->box)
    return -1;
  return sbx_cg_oom_kills(&priv->box->cg, out);
}

static int ctr_recover(const struct sbx_driver_env *env)
{
  (void)env;
  if (sbx_iso_init(NULL) < 0)
    return 0;
  /* Everything under our parent dir goes, including warm-pool entries
   * this process may already have built: drain the pool first and refill
   * it afterwards.  Call recover before creating any session. */
  sbx_pool_stop();
  int n = sbx_cg_recover(sbx_cg_host_default());
  struct sbx_error err = {0};
  if (init_memfd >= 0 && sbx_pool_start(build_pooled, &err) < 0)
    sbx_warn("container", "%s", err.msg);
  return n;
}

static void ctr_shutdown(void) { sbx_pool_stop(); }

const struct sbx_driver sbx_drv_container = {
    .abi = SBX_DRIVER_ABI,
    .name = "container",
    .klass = "shared-kernel",
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_TERMINAL | SBX_CAP_ARCHIVE |
            SBX_CAP_CONTEXTS | SBX_CAP_WATCH |
            /* its own network namespace: the ports proxy reaches only the sandbox */
            SBX_CAP_UPSTREAM | SBX_CAP_EGRESS |
            /* spec.layers become a copy-on-write root (isolation/overlay.c) */
            SBX_CAP_IMAGES,
    .probe = ctr_probe,
    .prewarm = sbx_ctr_prewarm,
    .pool_idle = sbx_ctr_pool_idle,
    .create = ctr_create,
    .destroy = sbx_ctr_destroy,
    .usage = sbx_ctr_usage,
    .oom_kills = sbx_ctr_oom_kills,
    .memory = sbx_ctr_memory,
    .recover = ctr_recover,
    .shutdown = ctr_shutdown,
};
