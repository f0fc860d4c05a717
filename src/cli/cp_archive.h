/* cp_archive.h — tar of a local directory and safe extraction of one, for
 * `sbx cp` of directories through the archive routes (cp_archive.c). */
#ifndef SBX_CLI_CP_ARCHIVE_H
#define SBX_CLI_CP_ARCHIVE_H

#include "common/err.h"

/* Writes a tar (pax) of the tree under dir to fd: regular files, dirs and
 * symlinks (stored as links, never followed) with modes and mtimes; other
 * file types are skipped with a note.  Names are relative to dir. */
int sbx_cp_tar_dir(const char *dir, int fd, struct sbx_error *err);

/* Extracts the tar readable from fd (from its start) into dir (created),
 * refusing absolute names, ".." and writing through symlinks (libarchive's
 * SECURE_* flags); modes and mtimes are kept, owners are not. */
int sbx_cp_untar(int fd, const char *dir, struct sbx_error *err);

/* The walk both directions of `sbx cp` share: each(ud, dir/NAME,
 * other/NAME, depth) for every entry NAME of the local directory dir but
 * "." and "..", until one fails.  Past SBX_CP_MAX_DEPTH levels: ELOOP. */
#define SBX_CP_MAX_DEPTH 128
typedef int sbx_cp_each_fn(void *ud, const char *path, const char *other, int depth,
                           struct sbx_error *err);
int sbx_cp_each_entry(const char *dir, const char *other, int depth, sbx_cp_each_fn *each,
                      void *ud, struct sbx_error *err);
/* "a/b" (a alone if b is "", b alone if a is ""); malloc'd. */
char *sbx_cp_join(const char *a, const char *b);

#endif
