/* cli.c — `sandboxd image pull|import|build|ls|rm|gc`: the image commands,
 * working directly on the state dir's store (beside a running daemon
 * too: the store is safe against other processes, see image.h).  The state
 * dir is found like `serve` finds it: --state-dir DIR (or --state DIR),
 * else SANDBOXD_STATE_DIR, else /var/lib/sandboxd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "image/image.h"

struct opts {
  const char *state;
  const char *name;
  /* build */
  const char *from, *packages, *mirror, *variant, *output;
  bool json;
  const char *args[4];
  int nargs;
};

static void usage(FILE *f)
{
  fprintf(
      f, "usage: sandboxd image COMMAND [--state-dir DIR]\n\n"
         "  pull REF                  pull from a registry (docker.io/…, host:port/…)\n"
         "  import PATH [--name REF]  import an OCI layout dir, OCI archive or docker-save tar\n"
         "  build --from debian:SUITE --packages P1,P2,… --name REF\n"
         "        [--mirror URL] [--variant apt|minbase|essential] [--output DIR]\n"
         "                            build an image of Debian packages with mmdebstrap\n"
         "  ls [--json]               list stored images\n"
         "  rm REF                    forget a reference (layers go at the next gc)\n"
         "  gc                        delete blobs and layers no reference uses\n\n"
         "Registry credentials: <state-dir>/auth.json (Docker's config.json format).\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
  memset(o, 0, sizeof *o);
  o->state = getenv("SANDBOXD_STATE_DIR");
  if (!o->state || !*o->state)
    o->state = "/var/lib/sandboxd";
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL, *ignored = NULL;
    /* --database/--config/--log-level: accepted like every state command
     * takes them; the image store lives in the state dir only */
    if (!strcmp(a, "--database") || !strcmp(a, "--config") || !strcmp(a, "--log-level"))
      dst = &ignored;
    else if (!strcmp(a, "--state-dir") || !strcmp(a, "--state"))
      dst = &o->state;
    else if (!strcmp(a, "--name"))
      dst = &o->name;
    else if (!strcmp(a, "--from"))
      dst = &o->from;
    else if (!strcmp(a, "--packages"))
      dst = &o->packages;
    else if (!strcmp(a, "--mirror"))
      dst = &o->mirror;
    else if (!strcmp(a, "--variant"))
      dst = &o->variant;
    else if (!strcmp(a, "--output"))
      dst = &o->output;
    if (dst) {
      if (i + 1 >= argc) {
        fprintf(stderr, "sandboxd image: %s needs a value\n", a);
        return -1;
      }
      *dst = argv[++i];
    } else if (!strncmp(a, "--state-dir=", 12)) {
      o->state = a + 12;
    } else if (!strncmp(a, "--name=", 7)) {
      o->name = a + 7;
    } else if (!strcmp(a, "--json")) {
      o->json = true;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "sandboxd image: unknown option %s\n", a);
      return -1;
    } else if (o->nargs < 4) {
      o->args[o->nargs++] = a;
    }
  }
  return 0;
}

/* A progress bar on a tty, a line per finished blob otherwise. */
static void progress(void *ud, const char *what, uint64_t done, uint64_t total)
{
  bool tty = *(bool *)ud;
  if (!tty) {
    if (done == total)
      fprintf(stderr, "pulled %.19s (%llu bytes)\n", what, (unsigned long long)total);
    return;
  }
  int width = 30, fill = total ? (int)(done * (uint64_t)width / total) : width;
  char bar[40];
  for (int i = 0; i < width; i++)
    bar[i] = i < fill ? '#' : ' ';
  bar[width] = '\0';
  fprintf(stderr, "\r%.19s [%s] %6.1f/%.1f MB", what, bar, done / 1e6, total / 1e6);
  if (done == total)
    fputc('\n', stderr);
  fflush(stderr);
}

/* mmdebstrap's lines and the build's own steps, as they come. */
static void build_progress(void *ud, const char *line)
{
  (void)ud;
  fprintf(stderr, "%s\n", line);
}

static void print_list(json_t *arr, bool as_json)
{
  if (as_json) {
    char *s = json_dumps(arr, JSON_INDENT(2));
    printf("%s\n", s ? s : "[]");
    free(s);
    return;
  }
  printf("%-50s %-19s %10s %s\n", "REF", "DIGEST", "SIZE", "CREATED");
  size_t i;
  json_t *o;
  json_array_foreach(arr, i, o)
  {
    printf("%-50s %.19s %10lld %s\n", json_string_value(json_object_get(o, "ref")),
           json_string_value(json_object_get(o, "digest")),
           (long long)json_integer_value(json_object_get(o, "size")),
           json_string_value(json_object_get(o, "created")));
  }
}

static int run(const char *cmd, struct opts *o, struct sbx_error *err)
{
  char canonical[700], digest[80];
  if (!strcmp(cmd, "pull") && o->nargs == 1) {
    bool tty = isatty(STDERR_FILENO);
    if (sbx_image_pull(o->args[0], progress, &tty, canonical, digest, err) < 0)
      return -1;
    printf("%s %s\n", canonical, digest);
  } else if (!strcmp(cmd, "import") && o->nargs == 1) {
    if (sbx_image_import(o->args[0], o->name, canonical, err) < 0)
      return -1;
    printf("%s\n", canonical);
  } else if (!strcmp(cmd, "build") && o->nargs == 0) {
    struct sbx_image_build b = {.from = o->from,
                                .packages = o->packages,
                                .name = o->name,
                                .mirror = o->mirror,
                                .variant = o->variant,
                                .output = o->output,
                                .progress = build_progress};
    if (sbx_image_build(&b, canonical, digest, err) < 0)
      return -1;
    printf("%s %s\n", canonical, digest);
  } else if (!strcmp(cmd, "ls") && o->nargs == 0) {
    json_t *arr;
    if (sbx_image_list(&arr, err) < 0)
      return -1;
    print_list(arr, o->json);
    json_decref(arr);
  } else if (!strcmp(cmd, "rm") && o->nargs == 1) {
    if (sbx_image_remove(o->args[0], err) < 0)
      return -1;
    printf("removed %s\n", o->args[0]);
  } else if (!strcmp(cmd, "gc") && o->nargs == 0) {
    struct sbx_image_gc_stats st;
    if (sbx_image_gc(&st, err) < 0)
      return -1;
    printf("removed %u blobs (%llu bytes), %u layers, %u temp entries; %u unreferenced layers "
           "in use kept\n",
           st.blobs_removed, (unsigned long long)st.bytes_freed, st.layers_removed,
           st.tmp_removed, st.layers_in_use);
  } else {
    return 2;
  }
  return 0;
}

int sbx_image_main(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  struct opts o;
  if (parse(argc, argv, &o) < 0)
    return 2;
  sbx_log_init(isatty(STDERR_FILENO) ? SBX_LOG_WARN : SBX_LOG_INFO, 0);
  struct sbx_error err = {0};
  if (sbx_image_store_open(o.state, &err) < 0) {
    fprintf(stderr, "sandboxd image: %s\n", err.msg);
    return 1;
  }
  int rc = run(argv[1], &o, &err);
  if (rc == 2) {
    usage(stderr);
    return 2;
  }
  if (rc < 0) {
    fprintf(stderr, "sandboxd image %s: %s\n", argv[1], err.msg);
    return 1;
  }
  return 0;
}
