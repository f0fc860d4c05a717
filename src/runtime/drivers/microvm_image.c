/* microvm_image.c — an OCI image as a microVM's root: its layers made into
 * one read-only squashfs image, built once per image and cached by its
 * manifest digest.
 *
 * One image per image rather than per layer: a guest then has one root
 * disk whatever the image's depth (virtio-mmio devices are few and each
 * costs boot time), and the whiteouts of upper layers are applied once,
 * here, by the host's overlayfs, instead of by an overlay of N disks in
 * every guest.  The price is disk: layers shared by two images are stored
 * twice (measured in docs/microvm.md).  The layers are mounted read-only
 * as an overlay on a private temporary dir, mksquashfs reads it, the
 * overlay goes; the file is written aside and renamed. */
#include "runtime/drivers/microvm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "runtime/drivers/cg_spawn.h"

#define MKSQUASHFS "/usr/bin/mksquashfs"
#define BUILD_MS (10u * 60 * 1000) /* a GiB-sized image takes tens of seconds */

/* One build at a time: two requests for one new image wait for the first
 * instead of both reading the layers. */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* "lowerdir=top:…:bottom" from the layers, lowest first. */
static int lowerdir_opts(const char *const *layers, size_t n, char *out, size_t len)
{
  size_t at = (size_t)snprintf(out, len, "lowerdir=");
  for (size_t i = n; i-- > 0;) {
    if (strchr(layers[i], ':') || strchr(layers[i], ','))
      return -1; /* would split the option */
    int w = snprintf(out + at, len - at, "%s%s", layers[i], i ? ":" : "");
    if (w < 0 || (size_t)w >= len - at)
      return -1;
    at += (size_t)w;
  }
  return 0;
}

static int run_mksquashfs(const char *src, const char *dst, struct sbx_error *err)
{
  char *argv[] = {MKSQUASHFS,  (char *)src,    (char *)dst, "-comp", "lz4",
                  "-noappend", "-no-progress", "-quiet",    NULL};
  static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (e)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, e, "microvm: cannot run %s: %s",
                       MKSQUASHFS, strerror(e));
  int st = 0;
  uint64_t deadline = sbx_now_ms() + BUILD_MS;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && sbx_now_ms() < deadline)
    usleep(20000);
  if (w == 0) {
    sbx_cg_spawn_reap(pid, 5000, true);
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, ETIMEDOUT,
                       "microvm: building the image's root took longer than %u s",
                       BUILD_MS / 1000);
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, 0,
                       "microvm: mksquashfs failed (status %d)", st);
  return 0;
}

/* Mounts the layers on a fresh dir, squashes it into tmp, unmounts.  One
 * layer is squashed as it is (overlayfs wants two lowers without an
 * upper, and one layer has no whiteouts to apply). */
static int squash_layers(const char *const *layers, size_t n, const char *work, const char *tmp,
                         struct sbx_error *err)
{
  if (n == 1)
    return run_mksquashfs(layers[0], tmp, err);
  char opts[16384], mnt[PATH_MAX + 16];
  if (lowerdir_opts(layers, n, opts, sizeof opts) < 0)
    return sbx_err_set(err, SBX_E_INVALID, EINVAL,
                       "microvm: the image's layer paths do not fit");
  snprintf(mnt, sizeof mnt, "%s/mnt-XXXXXX", work);
  if (!mkdtemp(mnt))
    return sbx_err_sys(err, errno, "microvm: mkdtemp %s", mnt);
  int rc;
  if (mount("sbx-image", mnt, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0) {
    rc = sbx_err_sys(err, errno, "microvm: mounting the image's layers");
  } else {
    rc = run_mksquashfs(mnt, tmp, err);
    if (umount2(mnt, MNT_DETACH) < 0)
      sbx_warn("microvm", "umount %s: %s", mnt, strerror(errno));
  }
  rmdir(mnt);
  return rc;
}

int sbx_mv_image_root(const char *images_dir, const char *digest, const char *const *layers,
                      size_t n, char *out, size_t len, struct sbx_error *err)
{
  if (!digest || !*digest || strchr(digest, '/') || n == 0)
    return sbx_err_field(err, "image", "an image with layers and a digest is needed");
  if (sbx_mkdir_p(images_dir, 0700) < 0)
    return sbx_err_sys(err, errno, "microvm: mkdir %s", images_dir);
  snprintf(out, len, "%s/%s.sqfs", images_dir, digest);
  pthread_mutex_lock(&build_lock);
  int rc = 0;
  if (access(out, R_OK) != 0) {
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    uint64_t t0 = sbx_now_ms();
    rc = squash_layers(layers, n, images_dir, tmp, err);
    if (rc == 0 && rename(tmp, out) < 0)
      rc = sbx_err_sys(err, errno, "microvm: rename %s", tmp);
    if (rc < 0)
      unlink(tmp);
    else
      sbx_info("microvm", "image root %s built in %llu ms", out,
               (unsigned long long)(sbx_now_ms() - t0));
  }
  pthread_mutex_unlock(&build_lock);
  return rc;
}
