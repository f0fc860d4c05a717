/* files.c — the file and port operations on a held session (core.h
 * "Files"), so the API never works the sandbox itself: a handler acquires
 * the session (sbx_session_acquire_cap), calls one of these and releases
 * it.  Each is the sandbox client's operation (runtime/sandbox.h), same
 * path rules and errors; core is the one layer that decides which
 * sandbox a tenant's request reaches. */
#include "core/internal.h"

int sbx_files_write(struct sbx_live_session *ls, const char *path, const void *data, size_t len,
                    struct sbx_error *err)
{
  return sbx_sandbox_file_write(sbx_live_sandbox(ls), path, data, len, err);
}

int sbx_files_open_read(struct sbx_live_session *ls, const char *path, int *fd_out,
                        uint64_t *size_out, struct sbx_error *err)
{
  return sbx_sandbox_file_open_read(sbx_live_sandbox(ls), path, fd_out, size_out, err);
}

int sbx_files_stat(struct sbx_live_session *ls, const char *path, struct sbx_stat *out,
                   struct sbx_error *err)
{
  return sbx_sandbox_stat(sbx_live_sandbox(ls), path, out, err);
}

int sbx_files_list(struct sbx_live_session *ls, const char *dir, struct sbx_dirent **out,
                   size_t *count, size_t max, struct sbx_error *err)
{
  return sbx_sandbox_list(sbx_live_sandbox(ls), dir, out, count, max, err);
}

int sbx_files_list_tree(struct sbx_live_session *ls, const char *dir, unsigned max_depth,
                        struct sbx_dirent **out, size_t *count, size_t max,
                        struct sbx_error *err)
{
  return sbx_sandbox_list_tree(sbx_live_sandbox(ls), dir, max_depth, out, count, max, err);
}

int sbx_files_mkdir(struct sbx_live_session *ls, const char *path, unsigned mode, unsigned flags,
                    struct sbx_error *err)
{
  return sbx_sandbox_mkdir(sbx_live_sandbox(ls), path, mode, flags, err);
}

int sbx_files_move(struct sbx_live_session *ls, const char *from, const char *to, bool overwrite,
                   struct sbx_error *err)
{
  return sbx_sandbox_move(sbx_live_sandbox(ls), from, to, overwrite, err);
}

int sbx_files_remove(struct sbx_live_session *ls, const char *path, struct sbx_error *err)
{
  return sbx_sandbox_remove(sbx_live_sandbox(ls), path, err);
}

int sbx_ports_connect(struct sbx_live_session *ls, unsigned port, unsigned timeout_ms,
                      int *fd_out, struct sbx_error *err)
{
  return sbx_sandbox_connect(sbx_live_sandbox(ls), port, timeout_ms, fd_out, err);
}
