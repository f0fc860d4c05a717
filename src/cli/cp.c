/* cp.c — `sbx cp`: files and directory trees between this machine and a
 * session.  A file is one request (PUT/GET …/files?path=, raw bytes).  A
 * directory is one tar through …/archive?path= when the session has the
 * `archive` capability (symlinks kept as links, modes and mtimes kept; the
 * tar is built and extracted here with libarchive, cp_archive.c);
 * otherwise it is walked file by file (?list=true), and symlinks and
 * special files are skipped with a note. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cp_archive.h"
#include "common/cleanup.h"
#include "common/util.h"

static const char help[] =
    "Usage: sbx cp LOCAL ID:REMOTE\n"
    "       sbx cp ID:REMOTE LOCAL\n"
    "\n"
    "Copies a file or a directory tree to or from session ID.  Like cp -r: if\n"
    "the destination is an existing directory, the source is copied into it\n"
    "under its own name.  Parent directories are created as needed.  LOCAL may\n"
    "be '-' to write a remote file to stdout.  A local path containing ':'\n"
    "must start with '/' or './'.  A directory goes as one tar archive when the\n"
    "session has the archive capability (symlinks, modes and mtimes kept);\n"
    "otherwise file by file, skipping symlinks and special files.\n"
    "\n"
    "Options: --url URL, --api-key KEY (see `sbx --help`), -h/--help.\n"
    "Exit status: 0 on success, 1 for an API, network or local file error, 2\n"
    "for a usage error.\n"
    "\n"
    "Examples:\n"
    "  sbx cp ./data.csv ses_123:/work/data.csv\n"
    "  sbx cp ./src ses_123:/work/          # → /work/src/…\n"
    "  sbx cp ses_123:/work/out ./results\n";

static const struct option longopts[] = {SBX_CLI_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};

struct cp_ctx {
  struct sbx_cli *cli;
  const char *id;
};

/* "ID:PATH" with an id of [A-Za-z0-9_-]; anything else is local. */
static bool split_remote(const char *arg, char **id, const char **path)
{
  size_t n = strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
  if (n == 0 || arg[n] != ':')
    return false;
  *id = strndup(arg, n);
  *path = arg + n + 1;
  return *id != NULL;
}

static char *join(const char *dir, const char *name)
{
  char *out;
  size_t n = strlen(dir);
  if (asprintf(&out, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
    abort();
  return out;
}

/* The last component of a path ("" for "/" or "."-like paths). */
static char *base_name(const char *path)
{
  _cleanup_free_ char *copy = strdup(path);
  if (!copy)
    abort();
  const char *b = basename(copy);
  if (!strcmp(b, "/") || !strcmp(b, ".") || !strcmp(b, ".."))
    b = "";
  char *out = strdup(b);
  if (!out)
    abort();
  return out;
}

static char *files_url(struct cp_ctx *c, const char *remote, bool list)
{
  _cleanup_free_ char *eid = sbx_http_escape(c->id);
  _cleanup_free_ char *epath = sbx_http_escape(remote);
  char *url;
  if (asprintf(&url, "/v1/sandbox/sessions/%s/files?path=%s%s", eid, epath,
               list ? "&list=true" : "") < 0)
    abort();
  return url;
}

static bool same_path(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  while (la > 1 && a[la - 1] == '/')
    la--;
  while (lb > 1 && b[lb - 1] == '/')
    lb--;
  return la == lb && !strncmp(a, b, la);
}

/* Lists a remote directory.  Returns 1 with *entries (new reference) if
 * REMOTE is a directory, 0 if it is not one or does not exist (the daemon
 * refused to list it with a 4xx), -1 if the daemon could not be asked. */
static int remote_list(struct cp_ctx *c, const char *remote, json_t **entries,
                       struct sbx_error *err)
{
  _cleanup_free_ char *url = files_url(c, remote, true);
  json_t *resp = NULL;
  if (sbx_http_json(c->cli->http, "GET", url, NULL, &resp, err) < 0) {
    long st = sbx_http_last_status(c->cli->http);
    return st >= 400 && st < 500 && st != 401 && st != 403 ? 0 : -1;
  }
  json_t *list = json_object_get(resp, "entries");
  json_t *first = json_array_get(list, 0);
  const char *fpath = json_string_value(json_object_get(first, "path"));
  /* A daemon may "list" a plain file as itself: that is not a directory. */
  bool is_dir = json_is_array(list) &&
                !(json_array_size(list) == 1 && fpath && same_path(fpath, remote) &&
                  strcmp(json_string_value(json_object_get(first, "type")) ?: "", "file") == 0);
  *entries = is_dir ? json_incref(list) : NULL;
  json_decref(resp);
  return is_dir ? 1 : 0;
}

static int put_file(struct cp_ctx *c, const char *local, const char *remote,
                    struct sbx_error *err)
{
  _cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return sbx_err_sys(err, errno, "cannot read %s", local);
  _cleanup_free_ char *url = files_url(c, remote, false);
  if (sbx_http_put_fd(c->cli->http, url, fd, st.st_size, err) < 0)
    return sbx_err_prefix(err, "%s → %s:%s", local, c->id, remote);
  return 0;
}

static int put_entry(void *ud, const char *local, const char *remote, int depth,
                     struct sbx_error *err)
{
  struct cp_ctx *c = ud;
  struct stat st;
  if (lstat(local, &st) < 0)
    return sbx_err_sys(err, errno, "cannot stat %s", local);
  if (S_ISREG(st.st_mode))
    return put_file(c, local, remote, err);
  if (S_ISDIR(st.st_mode))
    return sbx_cp_each_entry(local, remote, depth + 1, put_entry, c, err);
  fprintf(stderr, "sbx: note: skipping %s (not a regular file or directory)\n", local);
  return 0;
}

/* Does the session have the archive capability?  -1: could not ask. */
static int has_archive(struct cp_ctx *c, struct sbx_error *err)
{
  _cleanup_free_ char *eid = sbx_http_escape(c->id);
  _cleanup_free_ char *url = NULL;
  if (asprintf(&url, "/v1/sandbox/sessions/%s", eid) < 0)
    abort();
  json_t *s = NULL;
  if (sbx_http_json(c->cli->http, "GET", url, NULL, &s, err) < 0)
    return -1;
  size_t i;
  json_t *v;
  int yes = 0;
  json_array_foreach(json_object_get(s, "capabilities"), i, v)
  {
    if (json_is_string(v) && !strcmp(json_string_value(v), "archive"))
      yes = 1;
  }
  json_decref(s);
  return yes;
}

static char *archive_url(struct cp_ctx *c, const char *remote)
{
  _cleanup_free_ char *eid = sbx_http_escape(c->id);
  _cleanup_free_ char *epath = sbx_http_escape(remote);
  char *url;
  if (asprintf(&url, "/v1/sandbox/sessions/%s/archive?path=%s", eid, epath) < 0)
    abort();
  return url;
}

/* A temp file for a tar, already unlinked when by_path is false. */
static int temp_file(char *path, size_t len, bool by_path, struct sbx_error *err)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(path, len, "%s/sbx-cp-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0)
    return sbx_err_sys(err, errno, "cannot create a temporary file in %s", path);
  if (!by_path)
    unlink(path);
  return fd;
}

static int put_archive(struct cp_ctx *c, const char *local, const char *remote,
                       struct sbx_error *err)
{
  char path[4096];
  _cleanup_close_ int fd = temp_file(path, sizeof path, false, err);
  if (fd < 0 || sbx_cp_tar_dir(local, fd, err) < 0)
    return -1;
  off_t size = lseek(fd, 0, SEEK_END);
  if (size < 0 || lseek(fd, 0, SEEK_SET) < 0)
    return sbx_err_sys(err, errno, "archive of %s", local);
  _cleanup_free_ char *url = archive_url(c, remote);
  if (sbx_http_put_fd(c->cli->http, url, fd, size, err) < 0)
    return sbx_err_prefix(err, "%s → %s:%s", local, c->id, remote);
  return 0;
}

static int get_archive(struct cp_ctx *c, const char *remote, const char *local,
                       struct sbx_error *err)
{
  char path[4096];
  int fd = temp_file(path, sizeof path, true, err);
  if (fd < 0)
    return -1;
  close(fd);
  _cleanup_free_ char *url = archive_url(c, remote);
  int r = sbx_http_get_to_file(c->cli->http, url, path, 0600, err);
  if (r < 0)
    sbx_err_prefix(err, "%s:%s", c->id, remote);
  else if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    r = sbx_err_sys(err, errno, "cannot read %s", path);
  else {
    r = sbx_cp_untar(fd, local, err);
    close(fd);
  }
  unlink(path);
  return r;
}

static int upload(struct cp_ctx *c, const char *local, const char *remote, struct sbx_error *err)
{
  struct stat st;
  if (stat(local, &st) < 0)
    return sbx_err_sys(err, errno, "cannot copy %s", local);
  json_t *entries = NULL;
  int is_dir = remote_list(c, remote, &entries, err);
  json_decref(entries);
  if (is_dir < 0)
    return -1;
  _cleanup_free_ char *name = base_name(local);
  bool into = (is_dir || remote[strlen(remote) - 1] == '/') && *name;
  _cleanup_free_ char *target = into ? join(remote, name) : strdup(remote);
  if (S_ISDIR(st.st_mode)) {
    int arch = has_archive(c, err);
    return arch < 0 ? -1
           : arch   ? put_archive(c, local, target, err)
                    : sbx_cp_each_entry(local, target, 0, put_entry, c, err);
  }
  if (!S_ISREG(st.st_mode))
    return sbx_err_set(err, SBX_E_INVALID, 0, "%s is not a regular file or directory", local);
  return put_file(c, local, target, err);
}

static int get_file(struct cp_ctx *c, const char *remote, const char *local, unsigned mode,
                    struct sbx_error *err)
{
  _cleanup_free_ char *url = files_url(c, remote, false);
  if (sbx_http_get_to_file(c->cli->http, url, local, mode, err) < 0)
    return sbx_err_prefix(err, "%s:%s", c->id, remote);
  return 0;
}

static bool safe_name(const char *name)
{
  return name && *name && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/');
}

static int get_tree(struct cp_ctx *c, const char *remote, const char *local, json_t *entries,
                    int depth, struct sbx_error *err);

static int get_entry(struct cp_ctx *c, const char *remote, const char *local, json_t *e,
                     int depth, struct sbx_error *err)
{
  const char *name = json_string_value(json_object_get(e, "name"));
  const char *type = json_string_value(json_object_get(e, "type")) ?: "";
  if (!safe_name(name)) /* a hostile listing must not walk us out of LOCAL */
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "sandboxd listed an unsafe name in %s", remote);
  _cleanup_free_ char *r = join(remote, name);
  _cleanup_free_ char *l = join(local, name);
  json_t *mode = json_object_get(e, "mode");
  unsigned m = json_is_integer(mode) ? (unsigned)json_integer_value(mode) & 0777 : 0644;
  if (!strcmp(type, "file") || !strcmp(type, "regular"))
    return get_file(c, r, l, m | 0600, err);
  if (strcmp(type, "dir") && strcmp(type, "directory")) {
    fprintf(stderr, "sbx: note: skipping %s:%s (%s)\n", c->id, r, *type ? type : "unknown type");
    return 0;
  }
  json_t *sub = NULL;
  int is_dir = remote_list(c, r, &sub, err);
  if (is_dir != 1)
    return is_dir < 0 || err->msg[0]
               ? -1
               : sbx_err_set(err, SBX_E_INTERNAL, 0, "cannot list %s:%s", c->id, r);
  int rc = get_tree(c, r, l, sub, depth + 1, err);
  json_decref(sub);
  return rc;
}

static int get_tree(struct cp_ctx *c, const char *remote, const char *local, json_t *entries,
                    int depth, struct sbx_error *err)
{
  if (depth > SBX_CP_MAX_DEPTH)
    return sbx_err_set(err, SBX_E_INVALID, ELOOP, "%s: directories nested too deep", remote);
  if (sbx_mkdir_p(local, 0755) < 0)
    return sbx_err_sys(err, errno, "cannot create %s", local);
  size_t i;
  json_t *e;
  json_array_foreach(entries, i, e)
  {
    if (get_entry(c, remote, local, e, depth, err) < 0)
      return -1;
  }
  return 0;
}

static int download(struct cp_ctx *c, const char *remote, const char *local,
                    struct sbx_error *err)
{
  struct stat st;
  bool local_dir = strcmp(local, "-") && stat(local, &st) == 0 && S_ISDIR(st.st_mode);
  _cleanup_free_ char *name = base_name(remote);
  _cleanup_free_ char *target = local_dir && *name ? join(local, name) : strdup(local);
  json_t *entries = NULL;
  int is_dir = remote_list(c, remote, &entries, err);
  if (is_dir < 0)
    return -1;
  if (is_dir) {
    int arch = strcmp(local, "-") ? has_archive(c, err) : 0;
    int rc = !strcmp(local, "-")
                 ? sbx_err_set(err, SBX_E_INVALID, 0,
                               "%s:%s is a directory; cannot write it to stdout", c->id, remote)
             : arch < 0 ? -1
             : arch     ? get_archive(c, remote, target, err)
                        : get_tree(c, remote, target, entries, 0, err);
    json_decref(entries);
    return rc;
  }
  return get_file(c, remote, strcmp(local, "-") ? target : NULL, 0644, err);
}

static int copy(struct sbx_cli *cli, const char *src, const char *dst)
{
  _cleanup_free_ char *sid = NULL, *did = NULL;
  const char *spath = NULL, *dpath = NULL;
  bool src_remote = split_remote(src, &sid, &spath);
  bool dst_remote = split_remote(dst, &did, &dpath);
  if (src_remote == dst_remote)
    return sbx_cli_usage("cp", "exactly one of the two paths must be ID:REMOTE");
  if (!*(src_remote ? spath : dpath))
    return sbx_cli_usage("cp", "the remote path after 'ID:' is empty");
  if (!sbx_cli_http(cli))
    return SBX_EXIT_API;
  struct cp_ctx c = {.cli = cli, .id = src_remote ? sid : did};
  struct sbx_error err = {0};
  int r = src_remote ? download(&c, spath, dst, &err) : upload(&c, src, dpath, &err);
  return r < 0 ? sbx_cli_fail_api(cli, &err) : SBX_EXIT_OK;
}

int sbx_cmd_cp(struct sbx_cli *cli, int argc, char **argv)
{
  struct sbx_cli_args a;
  sbx_cli_split(argc, argv, "sbx cp", &a);
  const char *pos[2];
  int npos = 0, c, exit_now = -1;
  while ((c = sbx_cli_getopt(&a, "+h", longopts)) != -1) {
    if (c == SBX_OPT_POSITIONAL && npos < 2)
      pos[npos++] = optarg;
    else if (c == SBX_OPT_POSITIONAL)
      return sbx_cli_usage("cp", "too many arguments");
    else if (!sbx_cli_common_opt(cli, c, help, &exit_now))
      return sbx_cli_usage("cp", "bad option");
    if (exit_now >= 0)
      return exit_now;
  }
  for (int i = 0; i < a.nrest; i++) {
    if (npos == 2)
      return sbx_cli_usage("cp", "too many arguments");
    pos[npos++] = a.rest[i];
  }
  if (npos != 2)
    return sbx_cli_usage("cp", "wants a source and a destination");
  return copy(cli, pos[0], pos[1]);
}
