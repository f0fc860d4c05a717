/* overlay.c — an image sandbox's copy-on-write root, built by the daemon
 * (docs/isolation.md §7, docs/images.md).
 *
 * The image store unpacks each layer once, as plain directories owned by
 * the image's own ids (0 for root) with whiteouts in overlayfs form (0:0
 * char devices, trusted.overlay.opaque=y).  Per sandbox, nothing is copied
 * or chowned:
 *
 *   each layer   open_tree(OPEN_TREE_CLONE) → a detached bind, then
 *                mount_setattr(MOUNT_ATTR_IDMAP with the sandbox's user
 *                namespace | RDONLY | NOSUID | NODEV): on-disk uid 0 reads
 *                as the sandbox's host uid base, i.e. root *inside*
 *   upper        a detached tmpfs (fsopen/fsmount) of `disk` bytes holding
 *                upper/ and work/; never attached anywhere on the host
 *   overlay      fsopen("overlay"), lowerdir+ per layer (topmost first) or,
 *                on kernels before 6.7, one lowerdir list of the same
 *                clones' /proc/self/fd paths; upperdir, workdir; fsmount
 *                nosuid,nodev
 *
 * This needs real root in the initial user namespace: idmapping a mount
 * needs CAP_SYS_ADMIN over the layer's filesystem, and overlayfs reads the
 * store's trusted.overlay.* xattrs only for a mounter with CAP_SYS_ADMIN
 * there (a userns-mounted overlay would need userxattr).  So it runs on
 * the spawner thread right after the child's maps are written and before
 * "go"; the child receives the overlay's fd with "go" (SCM_RIGHTS) and
 * move_mount()s it as its root.  The layers stay read-only (the overlay
 * never writes a lower layer; the clones are RDONLY too), copy-ups and
 * whiteouts land in the upper tmpfs, and it all goes away with the
 * sandbox's mount namespace: the detached mounts here are referenced only
 * by the overlay.
 *
 * Where the layers cannot be idmapped (overlayfs before 5.19, a store on a
 * filesystem without idmap support) or image_layer_idmap = off, the
 * clones are of copies of the layers shifted to the sandbox's uid range
 * instead (shift.c), built once per layer and range and shared.
 *
 * Layer paths are daemon-controlled (the image store's). */
#include "isolation/iso.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

#ifndef FSCONFIG_SET_FD
#define FSCONFIG_SET_FD 5
#endif

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
  return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_fsopen(const char *fs) { return (int)syscall(SYS_fsopen, fs, FSOPEN_CLOEXEC); }

static int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
  return (int)syscall(SYS_fsconfig, fd, cmd, key, value, aux);
}

static int sys_fsmount(int fd, unsigned attrs)
{
  return (int)syscall(SYS_fsmount, fd, FSMOUNT_CLOEXEC, attrs);
}

static void close_all(int *fds, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* Sets key to a directory given by fd.  FSCONFIG_SET_FD (overlayfs ≥ 6.13)
 * wants a real open file; older kernels take the /proc/self/fd path of it
 * (lowerdir+ needs ≥ 6.7). */
static int set_dir(int ofd, const char *key, int dirfd)
{
  if (sys_fsconfig(ofd, FSCONFIG_SET_FD, key, NULL, dirfd) == 0)
    return 0;
  char p[40];
  snprintf(p, sizeof p, "/proc/self/fd/%d", dirfd);
  return sys_fsconfig(ofd, FSCONFIG_SET_STRING, key, p, 0);
}

/* A detached, read-only clone of one layer dir, idmapped when userns_fd
 * is not -1 (*tree: its
 * mount fd, which must stay open until the overlay is created — closing
 * it dissolves the detached mount), reopened as a plain directory fd
 * (*dir; fsconfig refuses O_PATH files). */
static int layer_fds(const char *path, int userns_fd, int *tree, int *dir, struct sbx_error *err)
{
  int t =
      sys_open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
  if (t < 0)
    return sbx_err_sys(err, errno, "image layer %s: open_tree", path);
  struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
  if (userns_fd >= 0) {
    a.attr_set |= MOUNT_ATTR_IDMAP;
    a.userns_fd = (uint64_t)userns_fd;
  }
  if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &a, sizeof a) < 0) {
    int e = errno;
    close(t);
    return sbx_err_sys(err, e, "image layer %s: %s", path,
                       userns_fd >= 0 ? "idmapped mount (does its filesystem support idmapping?)"
                                      : "mount_setattr");
  }
  int fd = openat(t, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    close(t);
    return sbx_err_sys(err, e, "image layer %s", path);
  }
  *tree = t;
  *dir = fd;
  return 0;
}

/* The upper tmpfs with upper/ (owned and moded like the top layer's root,
 * as the sandbox sees it: it is the merged "/") and work/. */
static int make_upper(const struct sbx_overlay_spec *o, const struct stat *top, int *mnt,
                      int *upper, int *work, struct sbx_error *err)
{
  char size[24], inodes[24];
  snprintf(size, sizeof size, "%llu", (unsigned long long)o->upper_size);
  snprintf(inodes, sizeof inodes, "%llu", (unsigned long long)o->upper_inodes);
  int fs = sys_fsopen("tmpfs");
  if (fs < 0)
    return sbx_err_sys(err, errno, "image upper: fsopen tmpfs");
  int m = -1, r = -1;
  if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", o->upper_source, 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
      sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
      (m = sys_fsmount(fs, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
    sbx_err_sys(err, errno, "image upper: tmpfs of %s bytes", size);
    goto out;
  }
  mode_t mode = top->st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
  if (mkdirat(m, "upper", mode) < 0 ||
      fchownat(m, "upper", top->st_uid, top->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
      fchmodat(m, "upper", mode, 0) < 0 || mkdirat(m, "work", 0700) < 0) {
    sbx_err_sys(err, errno, "image upper: upper and work dirs");
    goto out;
  }
  *upper = openat(m, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  *work = openat(m, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*upper < 0 || *work < 0) {
    sbx_err_sys(err, errno, "image upper: opening upper and work");
    goto out;
  }
  r = 0;
out:
  close(fs);
  *mnt = m; /* must stay open until the overlay exists, as a layer's tree */
  return r;
}

/* How the layers reach overlayfs.  lowerdir+ (Linux 6.7+) takes one fd
 * per layer and no length limit; older kernels (Debian 12's 6.1, Ubuntu
 * 22.04's 5.15) only know the "lowerdir=a:b:c" string, which we build from
 * /proc/self/fd paths of the same detached idmapped clones, so both forms
 * mount exactly the same trees.  The string's limit (a page of mount data
 * on kernels before 6.5) fits SBX_ISO_MAX_LAYERS such paths.
 * The overlay_layers setting append|string forces one form (tests, hosts
 * where detection misleads; sbx_overlay_set_form); auto tries lowerdir+
 * and remembers which form this kernel took. */
enum layer_form { FORM_AUTO, FORM_APPEND, FORM_STRING };

static _Atomic int learned_form = FORM_AUTO;
static _Atomic int forced_form = FORM_AUTO;

void sbx_overlay_set_form(const char *form)
{
  forced_form = form && !strcmp(form, "append")   ? FORM_APPEND
                : form && !strcmp(form, "string") ? FORM_STRING
                                                  : FORM_AUTO;
}

static enum layer_form wanted_form(void)
{
  int f = forced_form;
  return f != FORM_AUTO ? (enum layer_form)f : (enum layer_form)learned_form;
}

const char *sbx_overlay_layer_form(void)
{
  switch (wanted_form()) {
  case FORM_APPEND:
    return "lowerdir+";
  case FORM_STRING:
    return "lowerdir";
  default:
    return "auto";
  }
}

/* Where the layers come from: fds (lowerdir+) or paths (the list form). */
struct layer_src {
  const int *lowers; /* lowerdir+: dir fds, lowest first */
  size_t n;
  int upper, work;                           /* lowerdir+: dir fds */
  const char *list, *upper_path, *work_path; /* list form: paths */
};

static int set_layers(int ofd, const struct layer_src *l)
{
  if (l->list)
    return sys_fsconfig(ofd, FSCONFIG_SET_STRING, "lowerdir", l->list, 0) == 0 &&
                   sys_fsconfig(ofd, FSCONFIG_SET_STRING, "upperdir", l->upper_path, 0) == 0 &&
                   sys_fsconfig(ofd, FSCONFIG_SET_STRING, "workdir", l->work_path, 0) == 0
               ? 0
               : -1;
  /* lowerdir+ appends below the ones already given: topmost first. */
  for (size_t i = l->n; i-- > 0;)
    if (set_dir(ofd, "lowerdir+", l->lowers[i]) < 0)
      return -1;
  return set_dir(ofd, "upperdir", l->upper) == 0 && set_dir(ofd, "workdir", l->work) == 0 ? 0
                                                                                          : -1;
}

/* One attempt at the overlay: the mount fd, or -1 with errno and *stage
 * saying which step refused. */
static int try_overlay(const struct sbx_overlay_spec *o, const struct layer_src *l,
                       const char **stage)
{
  int ofd = sys_fsopen("overlay");
  if (ofd < 0) {
    *stage = "fsopen overlay";
    return -1;
  }
  /* redirect_dir=nofollow and metacopy=off: a layer's own
   * trusted.overlay.redirect/metacopy xattrs are ignored (OCI layers have
   * no such thing; only whiteouts and opaque dirs are honoured).  Renaming
   * a directory that comes from the image gives EXDEV, as on Docker's
   * overlay2; mv and pip fall back to copying. */
  int mnt = -1;
  *stage = "overlay layers";
  if (sys_fsconfig(ofd, FSCONFIG_SET_STRING, "source", o->source, 0) == 0 &&
      sys_fsconfig(ofd, FSCONFIG_SET_STRING, "redirect_dir", "nofollow", 0) == 0 &&
      sys_fsconfig(ofd, FSCONFIG_SET_STRING, "metacopy", "off", 0) == 0 &&
      set_layers(ofd, l) == 0) {
    *stage = "mounting the overlay";
    if (sys_fsconfig(ofd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
      mnt = sys_fsmount(ofd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  }
  int e = errno;
  close(ofd);
  errno = e;
  return mnt;
}

/* The list form, for kernels before 6.7.  Their overlayfs takes layers by
 * path only and refuses a detached mount (clone_private_mount() wants the
 * mount in the caller's namespace), while our layer clones are detached
 * (idmapped) and so is the upper tmpfs.  So a short-lived thread takes a
 * mount namespace of its own (private: nothing propagates to the host),
 * attaches them under a tmpfs there, builds the overlay from those paths
 * (overlayfs keeps private clones of its layers) and exits; its namespace
 * and the attachments go with it, the detached overlay stays. */
#define STAGE_DIR "/tmp"
struct stage_job {
  const struct sbx_overlay_spec *o;
  const int *trees;
  size_t n;
  int upper_mnt;
  int mnt, errnum;
  const char *stage;
};

static int attach(int mnt, const char *name)
{
  char p[64];
  snprintf(p, sizeof p, STAGE_DIR "/%s", name);
  if (mkdir(p, 0700) < 0)
    return -1;
  return (int)syscall(SYS_move_mount, mnt, "", AT_FDCWD, p, MOVE_MOUNT_F_EMPTY_PATH);
}

static void *stage_main(void *arg)
{
  struct stage_job *j = arg;
  j->stage = "a private mount namespace for the layer list";
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      mount("sbx-stage", STAGE_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") < 0)
    goto out;
  static _Thread_local char list[SBX_ISO_MAX_LAYERS * 20 + 1];
  size_t len = 0;
  for (size_t i = j->n; i-- > 0;) {
    char name[16];
    snprintf(name, sizeof name, "l%zu", i);
    j->stage = "attaching the layers";
    if (attach(j->trees[i], name) < 0)
      goto out;
    len += (size_t)snprintf(list + len, sizeof list - len, "%s" STAGE_DIR "/%s",
                            i == j->n - 1 ? "" : ":", name);
  }
  j->stage = "attaching the upper";
  if (attach(j->upper_mnt, "u") < 0)
    goto out;
  struct layer_src l = {.list = list,
                        .upper_path = STAGE_DIR "/u/upper",
                        .work_path = STAGE_DIR "/u/work"};
  j->mnt = try_overlay(j->o, &l, &j->stage);
out:
  j->errnum = j->mnt < 0 ? errno : 0;
  return NULL;
}

static int staged_overlay(const struct sbx_overlay_spec *o, const int *trees, size_t n,
                          int upper_mnt, const char **stage)
{
  struct stage_job j = {.o = o, .trees = trees, .n = n, .upper_mnt = upper_mnt, .mnt = -1};
  pthread_t t;
  int rc = pthread_create(&t, NULL, stage_main, &j);
  if (rc) {
    *stage = "a thread for the layer list";
    errno = rc;
    return -1;
  }
  pthread_join(t, NULL);
  *stage = j.stage;
  errno = j.errnum;
  return j.mnt;
}

/* Kernels without lowerdir+ refuse it with EINVAL: at fsconfig (6.5, 6.6)
 * or, where overlayfs still takes legacy mount data (before 6.5), only at
 * create.  Either way the list form is tried once and, if it works, used
 * from then on.  The caller's layer and upper mounts are consumed by the
 * list form (attached, then gone with its namespace): it is tried last. */
static int build_overlay(const struct sbx_overlay_spec *o, const int *trees, const int *lowers,
                         size_t n, int upper_mnt, int upper, int work, struct sbx_error *err)
{
  enum layer_form form = wanted_form();
  const char *stage = "";
  struct layer_src fds = {.lowers = lowers, .n = n, .upper = upper, .work = work};
  int mnt = -1;
  if (form == FORM_STRING) {
    mnt = staged_overlay(o, trees, n, upper_mnt, &stage);
  } else {
    mnt = try_overlay(o, &fds, &stage);
    if (mnt < 0 && errno == EINVAL && form == FORM_AUTO) {
      mnt = staged_overlay(o, trees, n, upper_mnt, &stage);
      if (mnt >= 0) {
        learned_form = FORM_STRING;
        sbx_info("overlay", "this kernel's overlayfs has no lowerdir+: image layers are "
                            "passed as a lowerdir list");
      }
    } else if (mnt >= 0 && form == FORM_AUTO) {
      learned_form = FORM_APPEND;
    }
  }
  if (mnt < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno, "image: %s: %s (%s)", stage,
                       strerror(errno),
                       o->userns_fd >= 0 ? "overlayfs over idmapped layers needs Linux 5.19+"
                                         : "image roots need overlayfs, Linux 5.15+");
  return mnt;
}

int sbx_overlay_mount(const struct sbx_overlay_spec *o, struct sbx_error *err)
{
  if (!o->layers || o->nlayers == 0 || o->nlayers > SBX_ISO_MAX_LAYERS)
    return sbx_err_set(err, SBX_E_INVALID, EINVAL, "image: %zu layers (1..%d)", o->nlayers,
                       SBX_ISO_MAX_LAYERS);
  int trees[SBX_ISO_MAX_LAYERS], lowers[SBX_ISO_MAX_LAYERS];
  int upper_mnt = -1, upper = -1, work = -1, mnt = -1;
  size_t n = 0;
  for (; n < o->nlayers; n++) {
    if (!o->layers[n] || o->layers[n][0] != '/') {
      sbx_err_set(err, SBX_E_INTERNAL, EINVAL, "image layer %zu: not an absolute path", n);
      goto out;
    }
    if (layer_fds(o->layers[n], o->userns_fd, &trees[n], &lowers[n], err) < 0)
      goto out;
  }
  struct stat top;
  if (fstat(lowers[n - 1], &top) < 0) {
    sbx_err_sys(err, errno, "image: top layer");
    goto out;
  }
  if (make_upper(o, &top, &upper_mnt, &upper, &work, err) < 0)
    goto out;
  mnt = build_overlay(o, trees, lowers, n, upper_mnt, upper, work, err);
out:
  close_all(lowers, n);
  close_all(trees, n);
  int rest[] = {upper, work, upper_mnt};
  close_all(rest, sizeof rest / sizeof rest[0]);
  return mnt;
}

/* Whether the layers are idmapped into the sandbox (the default) or
 * replaced by shifted copies (shift.c): image_layer_idmap = off (the
 * daemon's setting, which the container driver passes to
 * sbx_overlay_set_layer_idmap) forces the copies; auto tries idmapping and, where the
 * kernel or the layers' filesystem refuses it, learns to use the copies
 * from then on. */
enum idmap_state { IDMAP_UNKNOWN, IDMAP_WORKS, IDMAP_REFUSED };
static _Atomic int idmap_off; /* sbx_overlay_set_layer_idmap */
static _Atomic int learned_idmap = IDMAP_UNKNOWN;

void sbx_overlay_set_layer_idmap(bool on) { idmap_off = !on; }

static bool forced_off(void) { return idmap_off; }

bool sbx_overlay_shifts_layers(void) { return forced_off() || learned_idmap == IDMAP_REFUSED; }

const char *sbx_overlay_layer_idmap(void)
{
  return sbx_overlay_shifts_layers()    ? "shifted"
         : learned_idmap == IDMAP_WORKS ? "idmapped"
                                        : "auto";
}

/* The host uid the child's namespace maps its 0 to ("0 base 65536"). */
static int child_base(pid_t pid, uid_t *base, struct sbx_error *err)
{
  char p[48];
  snprintf(p, sizeof p, "/proc/%d/uid_map", (int)pid);
  errno = 0;
  _cleanup_fclose_ FILE *f = fopen(p, "re");
  unsigned in, out, count;
  if (!f || fscanf(f, "%u %u %u", &in, &out, &count) != 3 || in != 0)
    return sbx_err_sys(err, errno ? errno : EINVAL, "image: %s", p);
  *base = out;
  return 0;
}

int sbx_overlay_prepare(const char *const *layers, size_t n, uid_t base, struct sbx_error *err)
{
  if (!sbx_overlay_shifts_layers())
    return 0;
  char path[PATH_MAX];
  for (size_t i = 0; i < n; i++) {
    if (!layers[i] || layers[i][0] != '/')
      return sbx_err_set(err, SBX_E_INTERNAL, EINVAL, "image layer %zu: not an absolute path",
                         i);
    if (sbx_shift_layer(layers[i], base, path, sizeof path, err) < 0)
      return -1;
  }
  return 0;
}

/* The overlay over shifted copies of the layers: plain (not idmapped)
 * read-only clones, as the gvisor driver's. */
static int shifted_overlay(pid_t pid, const struct sbx_overlay_spec *o, struct sbx_error *err)
{
  uid_t base = 0;
  if (child_base(pid, &base, err) < 0)
    return -1;
  if (o->nlayers == 0 || o->nlayers > SBX_ISO_MAX_LAYERS)
    return sbx_overlay_mount(o, err); /* refuses it */
  _cleanup_free_ char(*paths)[PATH_MAX] = calloc(o->nlayers, PATH_MAX);
  if (!paths)
    return sbx_err_sys(err, ENOMEM, "image: shifted layer paths");
  const char *layers[SBX_ISO_MAX_LAYERS];
  for (size_t i = 0; i < o->nlayers; i++) {
    if (sbx_shift_layer(o->layers[i], base, paths[i], PATH_MAX, err) < 0)
      return -1;
    layers[i] = paths[i];
  }
  struct sbx_overlay_spec s = *o;
  s.layers = layers;
  s.userns_fd = -1;
  return sbx_overlay_mount(&s, err);
}

/* A refusal of idmapped layers as such: EINVAL (overlayfs before 5.19,
 * "idmapped layers are currently not supported"; a filesystem without
 * FS_ALLOW_IDMAP), EPERM, ENOSYS (no mount_setattr), EOPNOTSUPP. */
static bool refused(const struct sbx_error *err)
{
  return err->errnum == EINVAL || err->errnum == EPERM || err->errnum == ENOSYS ||
         err->errnum == EOPNOTSUPP;
}

static int image_root(pid_t pid, const struct sbx_overlay_spec *o, struct sbx_error *err)
{
  char why[sizeof err->msg] = "image_layer_idmap = off";
  if (!sbx_overlay_shifts_layers()) {
    int mnt = sbx_overlay_mount(o, err);
    if (mnt >= 0)
      learned_idmap = IDMAP_WORKS;
    if (mnt >= 0 || learned_idmap == IDMAP_WORKS || !refused(err))
      return mnt;
    snprintf(why, sizeof why, "%s", err->msg);
  }
  int mnt = shifted_overlay(pid, o, err);
  if (mnt < 0 && learned_idmap != IDMAP_REFUSED && !forced_off()) {
    char copies[sizeof err->msg];
    snprintf(copies, sizeof copies, "%s", err->msg);
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, err->errnum,
                       "image: the layers cannot be idmapped (%s; overlayfs takes idmapped "
                       "layers from Linux 5.19, on a filesystem that can be idmapped) and "
                       "their shifted copies failed too: %s",
                       why, copies);
  }
  if (mnt >= 0 && learned_idmap != IDMAP_REFUSED) {
    learned_idmap = IDMAP_REFUSED; /* logged once per daemon */
    sbx_info("overlay",
             "image layers are not idmapped (%s): sandboxes use copies of each "
             "layer shifted to their uid range, made once per layer and range",
             why);
  }
  return mnt;
}

int sbx_overlay_build(pid_t pid, const struct sbx_iso_plan *p, struct sbx_error *err)
{
  char ns[48];
  snprintf(ns, sizeof ns, "/proc/%d/ns/user", (int)pid);
  /* pid is our unreaped child, so it cannot have been reused. */
  int userns = open(ns, O_RDONLY | O_CLOEXEC);
  if (userns < 0)
    return sbx_err_sys(err, errno, "image: %s", ns);
  struct sbx_overlay_spec o = {.layers = p->layers,
                               .nlayers = p->nlayers,
                               .userns_fd = userns,
                               .upper_size = p->upper_size,
                               .upper_inodes = p->upper_inodes,
                               .source = "sbx-image",
                               .upper_source = "sbx-upper"};
  int mnt = image_root(pid, &o, err);
  close(userns);
  return mnt;
}
