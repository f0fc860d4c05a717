/* archive_extract.c — PUT …/archive?path=D: extract an uploaded tar into
 * a directory of a live session, with path safety.
 *
 * Two passes over the (bounded, in-memory) body.  The first only reads
 * headers and refuses the whole archive at its first bad entry, before
 * anything is written: absolute names, ".." components, names too long,
 * devices/FIFOs/sockets, hard links other than to an earlier regular file
 * of the same archive, symlinks that are absolute or climb out of D,
 * entries reached through a symlink of the archive (so "l -> sub" then
 * "l/x" cannot be used to land somewhere a lexical check did not see), and
 * the entry-count and size limits.  The second pass extracts through
 * sbx-init (MKDIR, OPEN_WRITE, SYMLINK), so every path is resolved in the
 * sandbox's root whatever the sandbox itself planted in D.  Hard links are
 * written as copies of their earlier file. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "core/internal.h"

#define MAX_NAME 4000 /* an entry name, so D + "/" + name fits a path */

struct names {
  char **v;   /* normalised names seen (for links) */
  bool *link; /* is v[i] a symlink of the archive */
  bool *file; /* is v[i] a regular file of the archive */
  size_t n, cap;
};

static void names_free(struct names *s)
{
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
  free(s->link);
  free(s->file);
}

static int names_add(struct names *s, const char *name, bool link, bool file)
{
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 256;
    char **nv = realloc(s->v, nc * sizeof *nv);
    if (nv)
      s->v = nv;
    bool *nl = nv ? realloc(s->link, nc * sizeof *nl) : NULL;
    if (nl)
      s->link = nl;
    bool *nf = nl ? realloc(s->file, nc * sizeof *nf) : NULL;
    if (!nf)
      return -1;
    s->file = nf;
    s->cap = nc;
  }
  if (!(s->v[s->n] = strdup(name)))
    return -1;
  s->link[s->n] = link;
  s->file[s->n] = file;
  s->n++;
  return 0;
}

/* Last entry of that name wins (a later entry replaces an earlier one). */
static ssize_t names_find(const struct names *s, const char *name)
{
  for (size_t i = s->n; i-- > 0;)
    if (!strcmp(s->v[i], name))
      return (ssize_t)i;
  return -1;
}

static int bad_entry(struct sbx_error *err, const char *name, const char *why_en,
                     const char *why_fr)
{
  sbx_err_field(err, "body", "archive entry \"%.300s\": %s", name, why_en);
  return sbx_err_fr(err, "entrée d'archive « %.300s » : %s", name, why_fr);
}

/* Normalises an entry name into out: "./" prefixes and repeated or
 * trailing slashes go; absolute names, ".." and overlong names are refused.
 * An empty result is D itself. */
static int norm_name(const char *raw, char *out, size_t len, struct sbx_error *err)
{
  if (!raw || !*raw)
    return bad_entry(err, "", "empty name", "nom vide");
  if (raw[0] == '/')
    return bad_entry(err, raw, "absolute name", "nom absolu");
  size_t o = 0;
  for (const char *p = raw; *p;) {
    const char *e = strchrnul(p, '/');
    size_t n = (size_t)(e - p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return bad_entry(err, raw, "a \"..\" component", "un composant « .. »");
    if (n > 255)
      return bad_entry(err, raw, "a name component over 255 bytes",
                       "un composant de plus de 255 octets");
    if (n && !(n == 1 && p[0] == '.')) {
      if (o + n + 2 > len)
        return bad_entry(err, raw, "name too long", "nom trop long");
      if (o)
        out[o++] = '/';
      memcpy(out + o, p, n);
      o += n;
    }
    p = *e ? e + 1 : e;
  }
  out[o] = '\0';
  return 0;
}

/* A symlink's target must stay inside D, read lexically from the link's
 * own directory. */
static bool target_inside(const char *name, const char *target)
{
  if (!*target || target[0] == '/')
    return false;
  int depth = 0;
  for (const char *p = name; (p = strchr(p, '/')); p++)
    depth++;
  for (const char *p = target; *p;) {
    const char *e = strchrnul(p, '/');
    size_t n = (size_t)(e - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      if (--depth < 0)
        return false;
    } else if (n && !(n == 1 && p[0] == '.')) {
      depth++;
    }
    p = *e ? e + 1 : e;
  }
  return true;
}

/* No proper prefix of name may be a symlink of the archive. */
static bool through_link(const struct names *s, char *name)
{
  for (char *p = name; (p = strchr(p, '/')); p++) {
    *p = '\0';
    ssize_t i = names_find(s, name);
    *p = '/';
    if (i >= 0 && s->link[i])
      return true;
  }
  return false;
}

static int check_type(struct archive_entry *e, const char *name, const struct names *s,
                      struct sbx_error *err)
{
  const char *hl = archive_entry_hardlink(e);
  if (hl) {
    char t[MAX_NAME + 1];
    struct sbx_error tmp = {0};
    ssize_t i = norm_name(hl, t, sizeof t, &tmp) < 0 ? -1 : names_find(s, t);
    if (i < 0 || !s->file[i])
      return bad_entry(err, name,
                       "a hard link to something other than an earlier file of "
                       "the archive",
                       "un lien physique vers autre chose qu'un fichier "
                       "précédent de l'archive");
    return 0;
  }
  switch (archive_entry_filetype(e)) {
  case AE_IFREG:
  case AE_IFDIR:
    return 0;
  case AE_IFLNK: {
    const char *t = archive_entry_symlink(e);
    if (!t || !target_inside(name, t) || strlen(t) >= 4096)
      return bad_entry(err, name, "a symlink whose target is absolute or leaves the directory",
                       "un lien symbolique absolu ou qui sort du répertoire");
    return 0;
  }
  default:
    return bad_entry(err, name,
                     "a device, FIFO or socket (only files, directories and "
                     "links are extracted)",
                     "un périphérique, FIFO ou socket");
  }
}

static struct archive *open_reader(const void *data, size_t len, struct sbx_error *err)
{
  struct archive *a = archive_read_new();
  if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK ||
      archive_read_support_filter_all(a) != ARCHIVE_OK ||
      archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
    sbx_err_field(err, "body", "not a tar archive: %s",
                  a ? archive_error_string(a) : "out of memory");
    if (a)
      archive_read_free(a);
    return NULL;
  }
  return a;
}

static int limit_err(struct sbx_error *err, const char *what, unsigned long long max)
{
  sbx_err_set(err, SBX_E_TOO_LARGE, 0, "the archive has more than %llu %s", max, what);
  return sbx_err_fr(err, "l'archive dépasse %llu %s", max,
                    !strcmp(what, "entries") ? "entrées" : "octets de fichiers");
}

/* Pass 1: every header, nothing written. */
int sbx_archive_validate(const void *data, size_t len, const struct sbx_archive_limits *lim,
                         struct sbx_error *err)
{
  struct archive *a = open_reader(data, len, err);
  if (!a)
    return -1;
  struct names s = {0};
  struct archive_entry *e;
  uint64_t bytes = 0;
  size_t count = 0;
  int r = 0, h;
  char name[MAX_NAME + 1];
  while (r == 0 && (h = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
    const char *raw = archive_entry_pathname(e);
    if ((r = norm_name(raw, name, sizeof name, err)) < 0 ||
        (r = check_type(e, raw, &s, err)) < 0)
      break;
    if (through_link(&s, name)) {
      r = bad_entry(err, raw, "a path through a symlink of the archive",
                    "un chemin qui traverse un lien symbolique de l'archive");
      break;
    }
    bool file = archive_entry_filetype(e) == AE_IFREG || archive_entry_hardlink(e);
    if (++count > lim->max_entries)
      r = limit_err(err, "entries", lim->max_entries);
    else if (file && (bytes += (uint64_t)archive_entry_size(e)) > lim->max_bytes)
      r = limit_err(err, "bytes of files", (unsigned long long)lim->max_bytes);
    else if (*name &&
             names_add(&s, name,
                       archive_entry_filetype(e) == AE_IFLNK && !archive_entry_hardlink(e),
                       file) < 0)
      r = sbx_err_sys(err, ENOMEM, "archive");
  }
  if (r == 0 && h != ARCHIVE_EOF)
    r = sbx_err_field(err, "body", "malformed tar archive: %s", archive_error_string(a));
  names_free(&s);
  archive_read_free(a);
  return r;
}

struct extract {
  struct sbx_sandbox *sb;
  struct archive *a;
  const char *dir;
  char path[4200];
  size_t entries;
  uint64_t bytes;
  char buf[64 * 1024];
};

static int join_path(struct extract *x, const char *name, char *out, size_t len,
                     struct sbx_error *err)
{
  size_t dl = strlen(x->dir);
  int n = snprintf(out, len, "%s%s%s", x->dir, dl && x->dir[dl - 1] == '/' ? "" : "/", name);
  if (n < 0 || (size_t)n >= len || n >= 4096)
    return bad_entry(err, name, "name too long", "nom trop long");
  return 0;
}

/* Opens path for writing, replacing a symlink or empty dir planted there. */
static int open_out(struct extract *x, const char *path, unsigned mode, int *fd,
                    struct sbx_error *err)
{
  if (sbx_sandbox_file_open_write(x->sb, path, mode, fd, err) == 0)
    return 0;
  if (err->errnum != ELOOP && err->errnum != EISDIR && err->errnum != EINVAL)
    return -1;
  sbx_err_clear(err);
  if (sbx_sandbox_remove(x->sb, path, err) < 0)
    return -1;
  return sbx_sandbox_file_open_write(x->sb, path, mode, fd, err);
}

static int write_fd(int fd, const char *path, const void *p, size_t n, struct sbx_error *err)
{
  if (sbx_write_all(fd, p, n) == (ssize_t)n)
    return 0;
  int e = errno;
  return sbx_err_set(err,
                     e == ENOSPC || e == EDQUOT || e == EFBIG ? SBX_E_TOO_LARGE : SBX_E_INTERNAL,
                     e, "write %s: %s", path, strerror(e));
}

static void finish_file(int fd, struct archive_entry *e)
{
  /* The daemon holds the very file: its mode and mtime are set on the fd,
   * no path involved. */
  fchmod(fd, archive_entry_perm(e) & 0777); /* never setuid/setgid/sticky */
  struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT},
                           {.tv_sec = archive_entry_mtime(e), .tv_nsec = 0}};
  futimens(fd, ts);
}

static int put_file(struct extract *x, struct archive_entry *e, const char *path,
                    struct sbx_error *err)
{
  _cleanup_close_ int fd = -1;
  if (open_out(x, path, 0600, &fd, err) < 0)
    return -1;
  for (;;) {
    la_ssize_t n = archive_read_data(x->a, x->buf, sizeof x->buf);
    if (n < 0)
      return sbx_err_field(err, "body", "reading the archive: %s", archive_error_string(x->a));
    if (n == 0)
      break;
    if (write_fd(fd, path, x->buf, (size_t)n, err) < 0)
      return -1;
    x->bytes += (uint64_t)n;
  }
  finish_file(fd, e);
  return 0;
}

/* A hard link to an earlier file of the archive: a copy of it. */
static int put_hardlink(struct extract *x, struct archive_entry *e, const char *path,
                        struct sbx_error *err)
{
  char name[MAX_NAME + 1], src[4200];
  if (norm_name(archive_entry_hardlink(e), name, sizeof name, err) < 0 ||
      join_path(x, name, src, sizeof src, err) < 0)
    return -1;
  _cleanup_close_ int in = -1, out = -1;
  uint64_t size;
  if (sbx_sandbox_file_open_read(x->sb, src, &in, &size, err) < 0 ||
      open_out(x, path, 0600, &out, err) < 0)
    return -1;
  ssize_t n;
  while ((n = read(in, x->buf, sizeof x->buf)) > 0) {
    if (write_fd(out, path, x->buf, (size_t)n, err) < 0)
      return -1;
    x->bytes += (uint64_t)n;
  }
  struct stat st;
  if (fstat(in, &st) == 0)
    fchmod(out, st.st_mode & 0777);
  return 0;
}

static int put_symlink(struct extract *x, struct archive_entry *e, const char *path,
                       struct sbx_error *err)
{
  char parent[4200];
  snprintf(parent, sizeof parent, "%s", path);
  *strrchr(parent, '/') = '\0';
  if (*parent && sbx_sandbox_mkdir(x->sb, parent, 0, SBX_MKDIR_PARENTS, err) < 0)
    return -1;
  const char *t = archive_entry_symlink(e);
  if (sbx_sandbox_symlink(x->sb, path, t, err) == 0)
    return 0;
  if (err->code != SBX_E_CONFLICT)
    return -1;
  sbx_err_clear(err);
  if (sbx_sandbox_remove(x->sb, path, err) < 0)
    return -1;
  return sbx_sandbox_symlink(x->sb, path, t, err);
}

static int put_entry(struct extract *x, struct archive_entry *e, struct sbx_error *err)
{
  char name[MAX_NAME + 1];
  if (norm_name(archive_entry_pathname(e), name, sizeof name, err) < 0)
    return -1;
  if (!*name) /* "./": D itself */
    return 0;
  if (join_path(x, name, x->path, sizeof x->path, err) < 0)
    return -1;
  x->entries++;
  if (archive_entry_hardlink(e))
    return put_hardlink(x, e, x->path, err);
  switch (archive_entry_filetype(e)) {
  case AE_IFDIR:
    /* Owner rwx while extracting, so a read-only directory still gets its
     * contents; the exact mode is applied at the end. */
    return sbx_sandbox_mkdir(x->sb, x->path, (archive_entry_perm(e) & 0777) | 0700,
                             SBX_MKDIR_PARENTS | SBX_MKDIR_MODE, err);
  case AE_IFLNK:
    return put_symlink(x, e, x->path, err);
  default:
    return put_file(x, e, x->path, err);
  }
}

/* Directories whose mode lacks owner rwx get it now, after their contents. */
static int fix_dir_modes(struct extract *x, const void *data, size_t len, struct sbx_error *err)
{
  struct archive *a = open_reader(data, len, err);
  if (!a)
    return -1;
  struct archive_entry *e;
  char name[MAX_NAME + 1];
  int r = 0;
  while (r == 0 && archive_read_next_header(a, &e) == ARCHIVE_OK) {
    unsigned m = archive_entry_perm(e) & 0777;
    if (archive_entry_filetype(e) != AE_IFDIR || archive_entry_hardlink(e) ||
        (m & 0700) == 0700 || norm_name(archive_entry_pathname(e), name, sizeof name, err) < 0 ||
        !*name)
      continue;
    if (join_path(x, name, x->path, sizeof x->path, err) == 0)
      r = sbx_sandbox_mkdir(x->sb, x->path, m, SBX_MKDIR_PARENTS | SBX_MKDIR_MODE, err);
  }
  archive_read_free(a);
  return r;
}

static int extract_all(struct extract *x, const void *data, size_t len, struct sbx_error *err)
{
  if (sbx_sandbox_mkdir(x->sb, x->dir, 0, SBX_MKDIR_PARENTS, err) < 0)
    return -1;
  if (!(x->a = open_reader(data, len, err)))
    return -1;
  struct archive_entry *e;
  int r = 0;
  while (r == 0 && archive_read_next_header(x->a, &e) == ARCHIVE_OK)
    if ((r = put_entry(x, e, err)) < 0)
      sbx_err_prefix(err, "extracting \"%.200s\"", archive_entry_pathname(e));
  archive_read_free(x->a);
  x->a = NULL;
  if (r < 0 || fix_dir_modes(x, data, len, err) < 0)
    return -1;
  /* gVisor (fd-in): the last file reaches the sandbox now, and so does
   * its error (a full disk is 413, not a log line). */
  return sbx_sandbox_file_flush(x->sb, err);
}

int sbx_archive_extract(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                        const char *dir, const void *data, size_t len,
                        const struct sbx_archive_limits *lim, json_t **out,
                        struct sbx_error *err)
{
  if (!len)
    return sbx_err_field(err, "body", "an archive (tar) body is required");
  struct sbx_live_session *ls = sbx_session_acquire_cap(core, who, id, SBX_CAP_ARCHIVE, err);
  if (!ls)
    return -1;
  struct extract *x = calloc(1, sizeof *x);
  int r = -1;
  if (!x)
    sbx_err_sys(err, ENOMEM, "archive");
  else if (sbx_archive_validate(data, len, lim, err) == 0) {
    x->sb = ls->sb;
    x->dir = dir;
    r = extract_all(x, data, len, err);
  }
  if (r == 0)
    *out = json_pack("{s:s, s:I, s:I}", "path", dir, "entries", (json_int_t)x->entries, "bytes",
                     (json_int_t)x->bytes);
  free(x);
  sbx_session_release(core, ls);
  return r;
}
