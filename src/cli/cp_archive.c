/* cp_archive.c — see cp_archive.h.  The daemon's own checks make a tar
 * from the archive route safe to extract, but the CLI does not rely on it:
 * a hostile or buggy server must not write outside the destination. */
#include "cli/cp_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

static int lib_err(struct archive *a, const char *what, struct sbx_error *err)
{
  return sbx_err_set(err, SBX_E_INTERNAL, archive_errno(a), "%s: %s", what,
                     archive_error_string(a) ?: "libarchive error");
}

static int add_data(struct archive *a, const char *path, struct sbx_error *err)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_err_sys(err, errno, "cannot read %s", path);
  char buf[64 * 1024];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (archive_write_data(a, buf, (size_t)n) != n)
      return lib_err(a, path, err);
  return n < 0 ? sbx_err_sys(err, errno, "cannot read %s", path) : 0;
}

static int add_entry(void *ud, const char *path, const char *rel, int depth,
                     struct sbx_error *err)
{
  struct archive *a = ud;
  struct stat st;
  if (lstat(path, &st) < 0)
    return sbx_err_sys(err, errno, "cannot stat %s", path);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
    fprintf(stderr, "sbx: note: skipping %s (not a file, directory or symlink)\n", path);
    return 0;
  }
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_stat(e, &st);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_pathname(e, rel);
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) {
      archive_entry_free(e);
      return sbx_err_sys(err, errno, "cannot read link %s", path);
    }
    target[n] = '\0';
    archive_entry_set_symlink(e, target);
  }
  int r = archive_write_header(a, e) != ARCHIVE_OK ? lib_err(a, path, err) : 0;
  archive_entry_free(e);
  if (r == 0 && S_ISREG(st.st_mode))
    r = add_data(a, path, err);
  if (r == 0 && S_ISDIR(st.st_mode))
    r = sbx_cp_each_entry(path, rel, depth + 1, add_entry, a, err);
  return r;
}

char *sbx_cp_join(const char *a, const char *b)
{
  char *out;
  size_t n = strlen(a);
  if (asprintf(&out, "%s%s%s", a, n && *b && a[n - 1] != '/' ? "/" : "", b) < 0)
    abort();
  return out;
}

int sbx_cp_each_entry(const char *dir, const char *other, int depth, sbx_cp_each_fn *each,
                      void *ud, struct sbx_error *err)
{
  if (depth > SBX_CP_MAX_DEPTH)
    return sbx_err_set(err, SBX_E_INVALID, ELOOP, "%s: directories nested too deep", dir);
  DIR *d = opendir(dir);
  if (!d)
    return sbx_err_sys(err, errno, "cannot open directory %s", dir);
  struct dirent *de;
  int r = 0;
  while (r == 0 && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    _cleanup_free_ char *p = sbx_cp_join(dir, de->d_name);
    _cleanup_free_ char *o = sbx_cp_join(other, de->d_name);
    r = each(ud, p, o, depth, err);
  }
  closedir(d);
  return r;
}

int sbx_cp_tar_dir(const char *dir, int fd, struct sbx_error *err)
{
  struct archive *a = archive_write_new();
  if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      archive_write_open_fd(a, fd) != ARCHIVE_OK) {
    int r = a ? lib_err(a, "tar", err) : sbx_err_sys(err, ENOMEM, "tar");
    archive_write_free(a);
    return r;
  }
  int r = sbx_cp_each_entry(dir, "", 0, add_entry, a, err);
  if (archive_write_close(a) != ARCHIVE_OK && r == 0)
    r = lib_err(a, "tar", err);
  archive_write_free(a);
  return r;
}

static int copy_data(struct archive *in, struct archive *out, struct sbx_error *err)
{
  const void *buf;
  size_t len;
  la_int64_t off;
  int r;
  while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK)
    if (archive_write_data_block(out, buf, len, off) != ARCHIVE_OK)
      return lib_err(out, "extract", err);
  return r == ARCHIVE_EOF ? 0 : lib_err(in, "extract", err);
}

/* Runs in the destination directory: names stay relative, so libarchive's
 * SECURE_* checks apply to them as they are. */
static int extract_all(struct archive *in, struct archive *out, struct sbx_error *err)
{
  struct archive_entry *e;
  int h;
  while ((h = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
    const char *name = archive_entry_pathname(e);
    if (archive_write_header(out, e) != ARCHIVE_OK)
      return sbx_err_set(err, SBX_E_INVALID, 0, "refusing archive entry \"%s\": %s", name,
                         archive_error_string(out));
    if (archive_entry_size(e) > 0 && copy_data(in, out, err) < 0)
      return -1;
    if (archive_write_finish_entry(out) != ARCHIVE_OK)
      return lib_err(out, name, err);
  }
  return h == ARCHIVE_EOF ? 0 : lib_err(in, "reading the archive", err);
}

int sbx_cp_untar(int fd, const char *dir, struct sbx_error *err)
{
  if (lseek(fd, 0, SEEK_SET) < 0)
    return sbx_err_sys(err, errno, "archive");
  if (sbx_mkdir_p(dir, 0755) < 0)
    return sbx_err_sys(err, errno, "cannot create %s", dir);
  _cleanup_close_ int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (here < 0 || chdir(dir) < 0)
    return sbx_err_sys(err, errno, "cannot enter %s", dir);
  struct archive *in = archive_read_new(), *out = archive_write_disk_new();
  int r;
  if (!in || !out || archive_read_support_format_tar(in) != ARCHIVE_OK ||
      archive_read_open_fd(in, fd, 64 * 1024) != ARCHIVE_OK) {
    r = in ? lib_err(in, "archive", err) : sbx_err_sys(err, ENOMEM, "archive");
  } else {
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                            ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                            ARCHIVE_EXTRACT_UNLINK);
    r = extract_all(in, out, err);
    if (archive_write_close(out) != ARCHIVE_OK && r == 0)
      r = lib_err(out, "extract", err);
  }
  archive_read_free(in);
  archive_write_free(out);
  if (fchdir(here) < 0 && r == 0)
    r = sbx_err_sys(err, errno, "cannot return to the working directory");
  return r;
}
