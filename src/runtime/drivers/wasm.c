/* wasm.c — the `wasm` driver: WebAssembly for short, frequent runs
 * (docs/wasm.md).  A wasm sandbox is a container sandbox (container.c:
 * namespaces, seccomp, cgroup, no network) whose sbx-init also keeps an
 * engine running — Node's V8 with node:wasi, under Node's permission
 * model as a seat belt — and turns every exec into a job for it
 * (init/engine.c): a WASI preview 1 module named by argv[0] (*.wasm),
 * Python on Pyodide, or JavaScript on QuickJS compiled to WebAssembly
 * (the runner: wasm_runner.mjs, embedded at build time and handed to the
 * sandbox as a sealed memfd).  The engine is never the only wall.
 *
 * Warm: pooled sandboxes of a wasm profile are built with their engine
 * already started, so a run costs the hand-over plus the instantiation.
 * Fail closed: no Node (setting wasm_node) or no container wall, no wasm
 * profile.  Without the engine's packages (setting wasm_modules) WASI
 * modules still run and python/javascript are refused with the reason. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "init/proto.h"
#include "runtime/driver.h"
#include "runtime/drivers/container_int.h"

#define DEFAULT_NODE "/usr/bin/node"
#define DEFAULT_MODULES "/usr/local/lib/sandboxd/wasm/node_modules"

extern const char sbx_wasm_runner[];
extern const size_t sbx_wasm_runner_len;

static char node_path[512] = DEFAULT_NODE;
static char modules_dir[512] = DEFAULT_MODULES;
static char modules_read[600], modules_arg[600];
static char *init_argv[48];
static struct sbx_ctr_engine engine = {.init_argv = init_argv, .stdin_fd = -1};
static char note[256];

/* The runner's script as a sealed memfd: what every sandbox's engine
 * reads, which no sandbox can change. */
static int runner_memfd(struct sbx_error *err)
{
  int fd = memfd_create("sbx-wasm-runner", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return sbx_err_sys(err, errno, "memfd for the wasm runner");
  if (write(fd, sbx_wasm_runner, sbx_wasm_runner_len) != (ssize_t)sbx_wasm_runner_len ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    int e = errno;
    close(fd);
    return sbx_err_sys(err, e, "the wasm runner's memfd");
  }
  return fd;
}

/* sbx-init's argv: the engine and Node's permission flags — what the
 * runner may read and write: the sandbox's /work and /tmp, /proc for the
 * clients' stdio, the packages (one flag per path: Node 20 mis-parses a
 * comma list of wildcards) — and the script from stdin. */
static void build_argv(void)
{
  snprintf(modules_read, sizeof modules_read, "--allow-fs-read=%s/*", modules_dir);
  snprintf(modules_arg, sizeof modules_arg, "%s", modules_dir);
  char *args[] = {"--experimental-permission",
                  "--allow-wasi",
                  "--allow-worker",
                  "--allow-fs-read=/work/*",
                  "--allow-fs-read=/tmp/*",
                  "--allow-fs-read=/proc/*",
                  modules_read,
                  "--allow-fs-write=/work/*",
                  "--allow-fs-write=/tmp/*",
                  "--allow-fs-write=/proc/*",
                  "--no-warnings",
                  "--input-type=module",
                  "-",
                  "--socket",
                  SBX_PROTO_ENGINE_SOCKET,
                  "--modules",
                  modules_arg};
  size_t n = 0;
  init_argv[n++] = "sbx-init";
  init_argv[n++] = "--root";
  init_argv[n++] = "/";
  init_argv[n++] = "--engine";
  init_argv[n++] = node_path;
  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
    init_argv[n++] = "--engine-arg";
    init_argv[n++] = args[i];
  }
  init_argv[n] = NULL;
}

/* A path the sandbox sees: the host's /usr is its /usr (the host pack). */
static bool visible_in_sandbox(const char *path)
{
  return strncmp(path, "/usr/", 5) == 0 && !strstr(path, "/../");
}

static int wasm_probe(const struct sbx_driver_env *env, char *why, size_t whylen)
{
  const char *node = sbx_driver_setting(env, "wasm_node");
  const char *mods = sbx_driver_setting(env, "wasm_modules");
  snprintf(node_path, sizeof node_path, "%s", node && *node ? node : DEFAULT_NODE);
  snprintf(modules_dir, sizeof modules_dir, "%s", mods && *mods ? mods : DEFAULT_MODULES);
  char ctr_why[256];
  if (sbx_ctr_setup(env, ctr_why, sizeof ctr_why) < 0) {
    snprintf(why, whylen, "the wasm engine runs inside the container wall, unavailable here: %s",
             ctr_why);
    return -1;
  }
  if (!visible_in_sandbox(node_path) || access(node_path, X_OK) < 0) {
    snprintf(why, whylen,
             "no Node.js engine at %s (apt-get install nodejs, or set wasm_node to a node "
             "under /usr)",
             node_path);
    return -1;
  }
  struct stat st;
  if (!visible_in_sandbox(modules_dir) || stat(modules_dir, &st) < 0 || !S_ISDIR(st.st_mode))
    snprintf(note, sizeof note,
             "python and javascript unavailable: no engine packages in %s "
             "(scripts/wasm-deps.sh); WASI modules run",
             modules_dir);
  else
    note[0] = '\0';
  struct sbx_error err = {0};
  if (engine.stdin_fd < 0 && (engine.stdin_fd = runner_memfd(&err)) < 0) {
    snprintf(why, whylen, "%s", err.msg);
    return -1;
  }
  build_argv();
  sbx_info("wasm", "engine %s, packages %s%s%s", node_path, modules_dir, note[0] ? ": " : "",
           note);
  return 0;
}

static const char *wasm_note(void) { return note[0] ? note : NULL; }

static void wasm_prewarm(const char *profile, const struct sbx_limits *limits)
{
  sbx_ctr_engine_profile(profile, &engine);
  sbx_ctr_prewarm(profile, limits);
}

static int wasm_create(const struct sbx_sandbox_spec *spec, struct sbx_sandbox **out,
                       struct sbx_error *err)
{
  if (engine.stdin_fd < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "wasm driver not probed");
  if (spec->nlayers)
    return sbx_err_field(err, "image",
                         "the wasm profile runs modules on its own engine: image must be host");
  sbx_ctr_engine_profile(spec->profile, &engine); /* its pool, if it has one, has the engine */
  return sbx_ctr_create(&sbx_drv_wasm, spec, &engine, out, err);
}

const struct sbx_driver sbx_drv_wasm = {
    .abi = SBX_DRIVER_ABI,
    .name = "wasm",
    .klass = "wasm",
    /* Exec and file IO.  No terminal (a job has no tty), no watch and no
     * contexts (seed 002: exec + file IO); no upstream or egress: WASI
     * preview 1 in node:wasi has no sockets, so nothing in the sandbox can
     * serve or dial. */
    .caps = SBX_CAP_EXEC | SBX_CAP_FILES | SBX_CAP_ARCHIVE,
    .probe = wasm_probe,
    .note = wasm_note,
    .prewarm = wasm_prewarm,
    .pool_idle = sbx_ctr_pool_idle,
    .create = wasm_create,
    .destroy = sbx_ctr_destroy,
    .usage = sbx_ctr_usage,
    .oom_kills = sbx_ctr_oom_kills,
    .memory = sbx_ctr_memory,
};
