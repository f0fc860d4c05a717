/* archive.c — GET …/archive?path=D: a tar of a directory of a live
 * session, produced from inside the sandbox (walked with LIST, files read
 * with OPEN_READ, links with READLINK: every path resolved by sbx-init in
 * the sandbox's root, no symlink ever followed) and streamed as the client
 * reads it.
 *
 * The walk comes first, so the limits (entries, total bytes) answer 413
 * before any byte is sent.  Then each call of sbx_archive_read() makes
 * libarchive produce the next piece (a header, or up to 64 KiB of file
 * data) into a small buffer: memory stays ~O(listing + 64 KiB) whatever the
 * tree's size, and a client that stops reading stops the walk.  Also owns
 * sbx_session_acquire_cap(). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "core/internal.h"

#define CHUNK (64 * 1024)

struct sbx_live_session *sbx_session_acquire_cap(struct sbx_core *core,
                                                 const struct sbx_principal *who, const char *id,
                                                 uint32_t cap, struct sbx_error *err)
{
  struct sbx_live_session *ls = sbx_session_acquire(core, who, id, err);
  if (!ls || (ls->sb->driver->caps & cap))
    return ls;
  const char *drv = ls->sb->driver->name;
  sbx_session_release(core, ls);
  sbx_err_set(err, SBX_E_CONFLICT, 0,
              "session %s runs on the %s driver, which has no %s capability", id, drv,
              sbx_cap_name(cap));
  sbx_err_fr(err, "La session %s tourne sur le pilote %s, qui n'offre pas la capacité %s", id,
             drv, sbx_cap_name(cap));
  return NULL;
}

struct sbx_archive_out {
  struct sbx_core *core;
  struct sbx_live_session *ls;
  struct archive *a;
  struct sbx_dirent *ents;
  size_t n, next;
  size_t dirlen; /* strlen of D ("/" → 0, so names never start with '/') */
  int fd;        /* file being copied, or -1 */
  uint64_t left; /* its bytes still to send */
  uint64_t total, max_bytes;
  char *out; /* what libarchive produced and the client has not read */
  size_t olen, ooff, ocap;
  bool done;
  char chunk[CHUNK];
};

/* libarchive's sink: keep the bytes for the next sbx_archive_read(). */
static la_ssize_t collect(struct archive *a, void *ctx, const void *buf, size_t n)
{
  struct sbx_archive_out *o = ctx;
  if (o->olen + n > o->ocap) {
    size_t nc = o->ocap ? o->ocap : CHUNK * 2;
    while (nc < o->olen + n)
      nc *= 2;
    char *nb = realloc(o->out, nc);
    if (!nb) {
      archive_set_error(a, ENOMEM, "out of memory");
      return -1;
    }
    o->out = nb;
    o->ocap = nc;
  }
  memcpy(o->out + o->olen, buf, n);
  o->olen += n;
  return (la_ssize_t)n;
}

static void stop(struct sbx_archive_out *o, const char *why)
{
  if (why)
    sbx_warn("archive", "%s: archive ended early: %s", o->ls->id, why);
  if (o->fd >= 0)
    close(o->fd);
  o->fd = -1;
  o->done = true;
}

static const char *rel_name(const struct sbx_archive_out *o, const struct sbx_dirent *d)
{
  return d->path + o->dirlen + 1;
}

/* Header of entry d (and, for a file, opens it for the data that follows).
 * Returns 0, or 1 to skip d (vanished, unreadable, special file). */
static int entry_header(struct sbx_archive_out *o, const struct sbx_dirent *d)
{
  struct sbx_sandbox *sb = o->ls->sb;
  struct sbx_error err = {0};
  struct archive_entry *e = archive_entry_new();
  if (!e)
    return -1;
  archive_entry_set_pathname(e, rel_name(o, d));
  archive_entry_set_perm(e, d->mode & 07777);
  archive_entry_set_mtime(e, d->mtime, 0);
  int rc = 0;
  char target[4096];
  uint64_t size = 0;
  if (!strcmp(d->type, "dir")) {
    archive_entry_set_filetype(e, AE_IFDIR);
  } else if (!strcmp(d->type, "symlink")) {
    archive_entry_set_filetype(e, AE_IFLNK);
    if (sbx_sandbox_readlink(sb, d->path, target, sizeof target, &err) < 0)
      rc = 1;
    else
      archive_entry_set_symlink(e, target);
  } else if (!strcmp(d->type, "file")) {
    archive_entry_set_filetype(e, AE_IFREG);
    if (sbx_sandbox_file_open_read(sb, d->path, &o->fd, &size, &err) < 0)
      rc = 1;
    else if (o->total + size > o->max_bytes)
      rc = -1;
    archive_entry_set_size(e, (la_int64_t)size);
  } else {
    rc = 1; /* FIFOs, sockets, devices: never archived */
  }
  if (rc == 0 && archive_write_header(o->a, e) != ARCHIVE_OK)
    rc = -1;
  archive_entry_free(e);
  if (rc != 0 && o->fd >= 0) {
    close(o->fd);
    o->fd = -1;
  }
  if (rc == 0 && o->fd >= 0) {
    o->left = size;
    o->total += size;
  }
  return rc;
}

/* One piece of the file being copied; a file that shrank meanwhile is
 * padded with zeros by libarchive when the entry ends. */
static int file_data(struct sbx_archive_out *o)
{
  size_t want = o->left < CHUNK ? (size_t)o->left : CHUNK;
  ssize_t n = read(o->fd, o->chunk, want);
  if (n < 0 && errno == EINTR)
    return 0;
  if (n > 0 && archive_write_data(o->a, o->chunk, (size_t)n) != n)
    return -1;
  if (n > 0)
    o->left -= (uint64_t)n;
  if (n <= 0 || o->left == 0) {
    close(o->fd);
    o->fd = -1;
  }
  return 0;
}

/* Produces the next piece into o->out. */
static void step(struct sbx_archive_out *o)
{
  if (o->fd >= 0) {
    if (file_data(o) < 0)
      stop(o, archive_error_string(o->a));
    return;
  }
  while (o->next < o->n) {
    int r = entry_header(o, &o->ents[o->next++]);
    if (r < 0) {
      stop(o, o->total > o->max_bytes ? "the tree grew past the size limit"
                                      : archive_error_string(o->a));
      return;
    }
    if (r == 0)
      return;
  }
  if (archive_write_close(o->a) != ARCHIVE_OK)
    sbx_warn("archive", "%s: closing the tar: %s", o->ls->id, archive_error_string(o->a));
  o->done = true;
}

long sbx_archive_read(void *ctx, uint64_t pos, char *buf, size_t max)
{
  (void)pos;
  struct sbx_archive_out *o = ctx;
  while (o->ooff == o->olen) {
    o->ooff = o->olen = 0;
    if (o->done)
      return -1;
    step(o);
  }
  size_t n = o->olen - o->ooff < max ? o->olen - o->ooff : max;
  memcpy(buf, o->out + o->ooff, n);
  o->ooff += n;
  return (long)n;
}

void sbx_archive_close(void *ctx)
{
  struct sbx_archive_out *o = ctx;
  if (!o)
    return;
  if (o->fd >= 0)
    close(o->fd);
  if (o->a)
    archive_write_free(o->a);
  free(o->ents);
  free(o->out);
  if (o->ls)
    sbx_session_release(o->core, o->ls);
  free(o);
}

static int check_size(struct sbx_archive_out *o, const char *dir, struct sbx_error *err)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < o->n; i++)
    if (!strcmp(o->ents[i].type, "file"))
      sum += o->ents[i].size;
  if (sum <= o->max_bytes)
    return 0;
  sbx_err_set(err, SBX_E_TOO_LARGE, 0,
              "%s holds %llu bytes of files, over the archive limit "
              "of %llu",
              dir, (unsigned long long)sum, (unsigned long long)o->max_bytes);
  return sbx_err_fr(err,
                    "%s contient %llu octets de fichiers, au-delà de la limite de %llu "
                    "d'une archive",
                    dir, (unsigned long long)sum, (unsigned long long)o->max_bytes);
}

static int start_writer(struct sbx_archive_out *o, struct sbx_error *err)
{
  o->a = archive_write_new();
  if (!o->a || archive_write_set_format_pax_restricted(o->a) != ARCHIVE_OK ||
      archive_write_set_bytes_per_block(o->a, 0) != ARCHIVE_OK ||
      archive_write_open2(o->a, o, NULL, collect, NULL, NULL) != ARCHIVE_OK)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "libarchive: %s",
                       o->a ? archive_error_string(o->a) : "out of memory");
  return 0;
}

int sbx_archive_open(struct sbx_core *core, const struct sbx_principal *who, const char *id,
                     const char *dir, const struct sbx_archive_limits *lim,
                     struct sbx_archive_out **out, struct sbx_error *err)
{
  struct sbx_archive_out *o = calloc(1, sizeof *o);
  if (!o)
    return sbx_err_sys(err, ENOMEM, "archive");
  o->core = core;
  o->fd = -1;
  o->max_bytes = lim->max_bytes;
  o->ls = sbx_session_acquire_cap(core, who, id, SBX_CAP_ARCHIVE, err);
  if (!o->ls ||
      sbx_sandbox_list_tree(o->ls->sb, dir, 0, &o->ents, &o->n, lim->max_entries, err) < 0 ||
      check_size(o, dir, err) < 0 || start_writer(o, err) < 0) {
    if (err->code == SBX_E_TOO_LARGE && err->errnum == 0 && !err->msg_fr[0])
      sbx_err_prefix(err, "%s: over the archive limit", dir);
    sbx_archive_close(o);
    return -1;
  }
  /* The listing's paths all start with D's normalised form + "/". */
  o->dirlen = o->n ? (size_t)(strrchr(o->ents[0].path, '/') - o->ents[0].path) : 0;
  *out = o;
  return 0;
}
