/* image_use.c — what a request's `image` means to the core: which
 * reference it names (the host pack or an OCI image), getting the image
 * from the store (pulling it when the daemon's `pull` setting allows), and
 * the image config applied to every exec in a sandbox built from it: Env
 * under the request's, WorkingDir as the default cwd, Entrypoint+Cmd for an
 * execution without a command, and `language` resolved to the interpreter
 * the image really has.
 *
 * The image module owns references, the store and pulls (src/image); the
 * driver owns mounting the layers (spec.layers). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "core/internal.h"
#include "image/image.h"

static bool is_host(const char *ref) { return !ref || !*ref || strcmp(ref, "host") == 0; }

int sbx_core_image_check(const struct sbx_profile *p, json_t *v, char ref_out[SBX_IMAGE_REF_MAX],
                         struct sbx_error *err)
{
  ref_out[0] = '\0';
  const char *text = p->image;
  if (v && !json_is_null(v)) {
    if (!json_is_string(v))
      return sbx_err_field(err, "image", "image must be a string");
    text = json_string_value(v);
  }
  if (is_host(text))
    return 0;
  struct sbx_image_ref ref;
  if (sbx_image_ref_parse(text, "image", &ref, err) < 0)
    return -1;
  if (sbx_profile_require(p, SBX_CAP_IMAGES, "image", "runs the host pack only",
                          "n'exécute que le paquet hôte", err) < 0)
    return -1;
  snprintf(ref_out, SBX_IMAGE_REF_MAX, "%s", ref.canonical);
  return 0;
}

int sbx_core_image_acquire(struct sbx_core *core, const char *ref, struct sbx_image **out,
                           struct sbx_error *err)
{
  *out = NULL;
  if (is_host(ref))
    return 0;
  if (!core->images_ok) {
    sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0, "the image store is unavailable: %s",
                core->images_why);
    return sbx_err_fr(err, "Le magasin d'images est indisponible : %s", core->images_why);
  }
  uint64_t t0 = sbx_now_ms();
  if (sbx_image_get(ref, core->cfg.image_pull ? SBX_IMAGE_PULL_NEVER : SBX_IMAGE_PULL_MISSING,
                    out, err) < 0)
    return -1;
  uint64_t ms = sbx_now_ms() - t0;
  if (ms > 1000)
    sbx_info("image", "%s ready in %.1f s (pulled)", ref, (double)ms / 1000.0);
  return 0;
}

/* ---- reading the merged image (top layer down) ----------------------- */

static const char *image_path(const struct sbx_image *img)
{
  for (char **e = img->env; e && *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0)
      return *e + 5;
  return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

/* Opens rel (flags: O_PATH|O_NOFOLLOW for "is it there", O_RDONLY to read
 * a file) in the merged image, looking from the top layer down: -1 when
 * absent or deleted by a whiteout above.  Paths are resolved inside each
 * layer (RESOLVE_IN_ROOT): an image's symlinks never lead out to the host. */
static int image_open(const struct sbx_image *img, const char *rel, int flags)
{
  for (size_t i = img->nlayers; i-- > 0;) {
    int root = open(img->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
      continue;
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
    close(root);
    if (fd < 0)
      continue; /* not in this layer: look below */
    struct stat st;
    if (fstat(fd, &st) < 0 || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))) {
      close(fd); /* an overlayfs whiteout: deleted in this layer */
      return -1;
    }
    return fd;
  }
  return -1;
}

/* Whether rel is a file or link (not a directory) in the merged image. */
static bool image_has(const struct sbx_image *img, const char *rel)
{
  int fd = image_open(img, rel, O_PATH | O_NOFOLLOW);
  if (fd < 0)
    return false;
  struct stat st;
  bool r = fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode);
  close(fd);
  return r;
}

/* ---- User -------------------------------------------------------------- */

/* Field 3 (id) of the line of /etc/passwd or /etc/group naming `name`, or
 * -1.  The image's own files, read through image_open (bounded: 1 MiB). */
static long lookup_id(const struct sbx_image *img, const char *file, const char *name,
                      long *gid_out)
{
  int fd = image_open(img, file, O_RDONLY | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return -1;
  }
  char line[1024];
  long id = -1;
  size_t total = 0, nlen = strlen(name);
  while (id < 0 && total < (1u << 20) && fgets(line, sizeof line, f)) {
    total += strlen(line);
    if (strncmp(line, name, nlen) != 0 || line[nlen] != ':')
      continue;
    char *save = NULL, *tok = strtok_r(line, ":", &save); /* name */
    tok = strtok_r(NULL, ":", &save);                     /* password */
    tok = tok ? strtok_r(NULL, ":", &save) : NULL;        /* id */
    if (tok)
      id = strtol(tok, NULL, 10);
    tok = tok ? strtok_r(NULL, ":", &save) : NULL; /* passwd: gid */
    if (gid_out && tok)
      *gid_out = strtol(tok, NULL, 10);
  }
  fclose(f);
  return id;
}

static bool all_digits(const char *s)
{
  if (!*s)
    return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return false;
  return true;
}

/* The image's User ("uid", "uid:gid", "name", "name:group") as ids inside
 * the sandbox.  Root (or unset) → 0/0: the sandbox user (workloads never
 * run as root; docs/images.md). */
static int image_user(const struct sbx_image *img, uint32_t *uid, uint32_t *gid,
                      struct sbx_error *err)
{
  *uid = *gid = 0;
  if (!img->user || !*img->user)
    return 0;
  char user[256], *group = NULL;
  snprintf(user, sizeof user, "%s", img->user);
  if ((group = strchr(user, ':')))
    *group++ = '\0';
  long u = -1, g = -1;
  if (all_digits(user))
    u = strtol(user, NULL, 10);
  else
    u = lookup_id(img, "etc/passwd", user, &g);
  if (group && all_digits(group))
    g = strtol(group, NULL, 10);
  else if (group)
    g = lookup_id(img, "etc/group", group, NULL);
  if (u < 0 || (group && g < 0)) {
    sbx_err_field(err, "image",
                  "image %s runs as user '%s', which its /etc/passwd or "
                  "/etc/group does not define",
                  img->ref, img->user);
    return sbx_err_fr(err,
                      "L'image %s s'exécute en tant que « %s », que son /etc/passwd "
                      "ou /etc/group ne définit pas",
                      img->ref, img->user);
  }
  if (g < 0)
    g = u; /* numeric uid without a group: Docker uses gid 0; we never run as root */
  if (u == 0)
    return 0; /* root → the sandbox user */
  if (u > 65535 || g > 65535 || g == 0) {
    if (g == 0 && u <= 65535)
      g = u; /* group root: the user's own id instead */
    else {
      sbx_err_field(err, "image",
                    "image %s runs as %ld:%ld, outside the sandbox's ids "
                    "(1 to 65535)",
                    img->ref, u, g);
      return sbx_err_fr(err,
                        "L'image %s s'exécute en tant que %ld:%ld, hors des "
                        "identifiants du bac à sable (1 à 65535)",
                        img->ref, u, g);
    }
  }
  *uid = (uint32_t)u;
  *gid = (uint32_t)g;
  return 0;
}

int sbx_core_image_spec(const struct sbx_image *img, struct sbx_sandbox_spec *spec,
                        struct sbx_error *err)
{
  if (!img)
    return 0;
  spec->layers = (const char *const *)img->layers;
  spec->nlayers = img->nlayers;
  spec->image_digest = img->digest;
  spec->image = img->ref;
  return image_user(img, &spec->run_uid, &spec->run_gid, err);
}

/* ---- the interpreter of `language` in the image --------------------- */

/* The absolute path of the first of names found on the image's PATH, or
 * NULL. */
static char *find_program(const struct sbx_image *img, const char *const *names)
{
  for (const char *const *n = names; *n; n++) {
    const char *path = image_path(img);
    while (*path) {
      size_t len = strcspn(path, ":");
      if (len > 0 && path[0] == '/' && len < 512) {
        char cand[768];
        snprintf(cand, sizeof cand, "%.*s/%s", (int)len, path, *n);
        if (image_has(img, cand + 1))
          return strdup(cand);
      }
      path += len + (path[len] == ':');
    }
  }
  return NULL;
}

/* An image's layers never change (content-addressed), so which interpreter
 * it has is looked up in them once per (manifest digest, language), not on
 * every exec: the lookup is a few openat2 per PATH directory and layer. */
#define INTERP_CACHE 64
static struct {
  char digest[80];
  char language[8];
  char path[768]; /* "" when the image has none */
} interp_cache[INTERP_CACHE];
static unsigned interp_next;
static pthread_mutex_t interp_lock = PTHREAD_MUTEX_INITIALIZER;

static char *find_interpreter(const struct sbx_image *img, const char *language,
                              const char *const *names)
{
  pthread_mutex_lock(&interp_lock);
  for (unsigned i = 0; i < INTERP_CACHE; i++)
    if (!strcmp(interp_cache[i].digest, img->digest) &&
        !strcmp(interp_cache[i].language, language)) {
      char *hit = interp_cache[i].path[0] ? strdup(interp_cache[i].path) : NULL;
      pthread_mutex_unlock(&interp_lock);
      return hit;
    }
  pthread_mutex_unlock(&interp_lock);
  char *path = find_program(img, names);
  if (path && strlen(path) >= sizeof interp_cache[0].path)
    return path; /* too long to remember: found again next time */
  pthread_mutex_lock(&interp_lock);
  unsigned slot = interp_next++ % INTERP_CACHE;
  snprintf(interp_cache[slot].digest, sizeof interp_cache[slot].digest, "%s", img->digest);
  snprintf(interp_cache[slot].language, sizeof interp_cache[slot].language, "%s", language);
  snprintf(interp_cache[slot].path, sizeof interp_cache[slot].path, "%s", path ? path : "");
  pthread_mutex_unlock(&interp_lock);
  return path;
}

static int resolve_interpreter(const struct sbx_image *img, struct sbx_exec_spec *spec,
                               struct sbx_error *err)
{
  static const char *const python[] = {"python3", "python", NULL};
  static const char *const node[] = {"node", "nodejs", NULL};
  static const char *const bash[] = {"bash", "sh", NULL};
  bool js = !strcmp(spec->language, "node") || !strcmp(spec->language, "javascript");
  const char *const *names = !strcmp(spec->language, "python") ? python : js ? node : bash;
  char *path = find_interpreter(img, spec->language, names);
  if (!path) {
    sbx_err_field(err, "language",
                  "image %s has no %s interpreter (looked for %s%s%s on its "
                  "PATH); use an image that has one, or a command",
                  img->ref, spec->language, names[0], names[1] ? " and " : "",
                  names[1] ? names[1] : "");
    return sbx_err_fr(err,
                      "L'image %s n'a pas d'interpréteur %s (cherché : %s%s%s dans son "
                      "PATH) ; choisissez une image qui en a un, ou une commande",
                      img->ref, spec->language, names[0], names[1] ? " et " : "",
                      names[1] ? names[1] : "");
  }
  free(spec->argv[0]);
  spec->argv[0] = path;
  return 0;
}

static int default_command(const struct sbx_image *img, struct sbx_exec_spec *spec,
                           struct sbx_error *err)
{
  size_t n = sbx_strv_len(img->entrypoint) + sbx_strv_len(img->cmd);
  if (n == 0) {
    sbx_err_field(err, "command", "image %s has no Entrypoint or Cmd: give a command", img->ref);
    return sbx_err_fr(err, "L'image %s n'a ni Entrypoint ni Cmd : donnez une commande",
                      img->ref);
  }
  char **argv = calloc(n + 1, sizeof *argv);
  if (!argv)
    return sbx_err_sys(err, ENOMEM, "command");
  size_t i = 0;
  for (char **p = img->entrypoint; p && *p; p++)
    argv[i++] = strdup(*p);
  for (char **p = img->cmd; p && *p; p++)
    argv[i++] = strdup(*p);
  for (size_t k = 0; k < n; k++)
    if (!argv[k]) {
      sbx_strv_free(argv);
      return sbx_err_sys(err, ENOMEM, "command");
    }
  sbx_strv_free(spec->argv);
  spec->argv = argv;
  return 0;
}

int sbx_core_image_exec(const struct sbx_image *img, struct sbx_exec_spec *spec,
                        bool use_default_command, struct sbx_error *err)
{
  if (!img)
    return 0;
  if (use_default_command && default_command(img, spec, err) < 0)
    return -1;
  if (spec->language && !use_default_command && resolve_interpreter(img, spec, err) < 0)
    return -1;
  if (!spec->cwd && img->workdir && img->workdir[0] == '/' &&
      !(spec->cwd = strdup(img->workdir)))
    return sbx_err_sys(err, ENOMEM, "cwd");
  return 0;
}

const char *const *sbx_core_image_env(const struct sbx_image *img)
{
  return img ? (const char *const *)img->env : NULL;
}

void sbx_core_images_start(struct sbx_core *core)
{
  struct sbx_error err = {0};
  if (sbx_image_store_open(core->state_dir, &err) < 0) {
    snprintf(core->images_why, sizeof core->images_why, "%s", err.msg);
    sbx_warn("core", "OCI images unavailable: %s", err.msg);
    return;
  }
  core->images_ok = true;
}
