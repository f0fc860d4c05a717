/* test_overlay.c — copy-on-write image roots (docs/isolation.md §7) on
 * real container sandboxes.
 *
 * The test builds a two-layer image by hand, in the form the image store
 * leaves it (plain dirs owned by the image's ids, whiteouts as 0:0 char
 * devices, trusted.overlay.opaque=y): busybox-static as /bin/busybox with
 * its applets linked, a root-owned 0644 file, a 1777 dir, a setuid-root
 * copy of the probe, a file owned by uid 1234; the upper layer adds a
 * file, whites one out and makes a dir opaque.  Sandboxes are created
 * through sbx_drv_container with spec.layers, exactly as the core does
 * once it has resolved an image.
 *
 * Asserts: image ownership inside (root files are uid 0 in the sandbox's
 * namespace), whiteout and opaque dir honoured, writes private to one
 * sandbox and gone with it, the layer dirs on the host byte-for-byte
 * unchanged (tree digest incl. modes, owners, xattrs) after all of it,
 * ENOSPC from the upper at the disk limit, the setuid bit inert, 20
 * sandboxes on the same layers adding no copies (du, overlay in
 * mountinfo), no host-visible mounts, and the host pack unchanged.
 *
 * The suite runs again with SANDBOXD_IMAGE_LAYER_IDMAP=off (meson test
 * isolation-overlay-shifted*): the same views over shifted copies of the
 * layers (isolation/shift.c), one per layer and uid range, shared by every
 * sandbox that gets that range; and a hostile layer for the copier.  With
 * SBX_TEST_LAYERS_ON_OVERLAYFS=1 (isolation-overlay-autodetect) it only
 * checks that auto learns the fallback from the kernel's refusal. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <sys/mount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "harness.h"
#include "isolation/iso.h"

static char img_dir[64];
static char lower[96], upper[96];
static const char *layers[2] = {lower, upper};
static unsigned long seq;

/* ---- building the image ------------------------------------------------- */

static int put_file(const char *dir, const char *rel, const void *data, size_t len, mode_t mode,
                    uid_t uid)
{
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  ssize_t w = write(fd, data, len);
  close(fd);
  /* chmod after chown: chown clears setuid bits */
  if (w != (ssize_t)len || chown(p, uid, uid) < 0 || chmod(p, mode) < 0)
    return -1;
  return 0;
}

static int put_dir(const char *dir, const char *rel, mode_t mode)
{
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  if (mkdir(p, mode) < 0 && errno != EEXIST)
    return -1;
  return chmod(p, mode);
}

static int copy_host_file(const char *from, const char *dir, const char *rel, mode_t mode)
{
  size_t len = 0;
  char *data = NULL;
  FILE *f = fopen(from, "rb");
  if (!f)
    return -1;
  struct stat st;
  fstat(fileno(f), &st);
  len = (size_t)st.st_size;
  data = malloc(len ? len : 1);
  size_t got = data ? fread(data, 1, len, f) : 0;
  fclose(f);
  int r = got == len ? put_file(dir, rel, data, len, mode, 0) : -1;
  free(data);
  return r;
}

static int build_image(void)
{
  snprintf(img_dir, sizeof img_dir, "/var/tmp/sbx-ovl-test-%d", (int)getpid());
  snprintf(lower, sizeof lower, "%s/l0", img_dir);
  snprintf(upper, sizeof upper, "%s/l1", img_dir);
  if (mkdir(img_dir, 0700) < 0 || mkdir(lower, 0755) < 0 || mkdir(upper, 0755) < 0)
    return -1;
  static const char *const applets[] = {"sh",    "ls",   "cat",  "stat", "id",
                                        "touch", "echo", "dd",   "rm",   "mkdir",
                                        "test",  "grep", "head", "sync", NULL};
  static const char passwd[] =
      "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/work:/bin/sh\n";
  static const char image_hosts[] = "10.9.9.9 image-hosts-file\n";
  char p[256];
  if (put_dir(lower, "bin", 0755) < 0 ||
      copy_host_file("/bin/busybox", lower, "bin/busybox", 0755) < 0)
    return -1;
  for (int i = 0; applets[i]; i++) {
    snprintf(p, sizeof p, "%s/bin/%s", lower, applets[i]);
    if (symlink("busybox", p) < 0)
      return -1;
  }
  if (put_file(lower, "bin/suidprobe", h_probe_bytes, h_probe_len, 04755, 0) < 0 ||
      put_dir(lower, "etc", 0755) < 0 ||
      put_file(lower, "etc/passwd", passwd, strlen(passwd), 0644, 0) < 0 ||
      put_file(lower, "etc/hosts", image_hosts, strlen(image_hosts), 0644, 0) < 0 ||
      put_dir(lower, "data", 0755) < 0 ||
      put_file(lower, "data/rootfile", "lower\n", 6, 0644, 0) < 0 ||
      put_file(lower, "data/owned1234", "x\n", 2, 0640, 1234) < 0 ||
      put_file(lower, "data/gone", "must not be seen\n", 17, 0644, 0) < 0 ||
      put_dir(lower, "shared", 01777) < 0 || put_dir(lower, "opq", 0755) < 0 ||
      put_file(lower, "opq/old", "old\n", 4, 0644, 0) < 0 || put_dir(lower, "tmp", 01777) < 0)
    return -1;
  /* resolv.conf as a dangling symlink, as systemd images have it */
  snprintf(p, sizeof p, "%s/etc/resolv.conf", lower);
  if (symlink("../run/systemd/resolve/stub-resolv.conf", p) < 0)
    return -1;
  /* upper layer: a new file, a whiteout and an opaque dir */
  if (put_dir(upper, "data", 0755) < 0 ||
      put_file(upper, "data/upperfile", "upper\n", 6, 0644, 0) < 0 ||
      put_dir(upper, "opq", 0755) < 0 || put_file(upper, "opq/new", "new\n", 4, 0644, 0) < 0)
    return -1;
  snprintf(p, sizeof p, "%s/data/gone", upper);
  if (mknod(p, S_IFCHR | 0, makedev(0, 0)) < 0)
    return -1;
  snprintf(p, sizeof p, "%s/opq", upper);
  if (setxattr(p, "trusted.overlay.opaque", "y", 1, 0) < 0)
    return -1;
  /* a redirect the store never writes: must not be followed to /data */
  if (put_dir(upper, "red", 0755) < 0)
    return -1;
  snprintf(p, sizeof p, "%s/red", upper);
  return setxattr(p, "trusted.overlay.redirect", "/data", 5, 0);
}

/* ---- a digest of a layer tree (names, types, modes, owners, sizes,
 * mtimes, link targets, xattrs, contents) ----------------------------- */

static uint64_t tree_h;
static uint64_t tree_blocks;

static void mix(const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    tree_h ^= b[i];
    tree_h *= 1099511628211ull;
  }
}

static int walk_fn(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)flag;
  (void)ftw;
  mix(path, strlen(path) + 1);
  uint64_t f[] = {st->st_mode,
                  st->st_uid,
                  st->st_gid,
                  (uint64_t)st->st_size,
                  st->st_rdev,
                  (uint64_t)st->st_mtim.tv_sec,
                  (uint64_t)st->st_mtim.tv_nsec,
                  st->st_nlink};
  mix(f, sizeof f);
  tree_blocks += (uint64_t)st->st_blocks;
  char buf[8192];
  if (S_ISLNK(st->st_mode)) {
    ssize_t n = readlink(path, buf, sizeof buf);
    if (n > 0)
      mix(buf, (size_t)n);
  } else if (S_ISREG(st->st_mode)) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
      mix(buf, (size_t)n);
    if (fd >= 0)
      close(fd);
  }
  char names[1024];
  ssize_t ln = llistxattr(path, names, sizeof names);
  for (ssize_t off = 0; ln > 0 && off < ln; off += (ssize_t)strlen(names + off) + 1) {
    ssize_t v = lgetxattr(path, names + off, buf, sizeof buf);
    mix(names + off, strlen(names + off));
    if (v > 0)
      mix(buf, (size_t)v);
  }
  return 0;
}

static uint64_t tree_digest(uint64_t *blocks)
{
  tree_h = 1469598103934665603ull;
  tree_blocks = 0;
  nftw(lower, walk_fn, 16, FTW_PHYS); /* the layers, not their shifted copies beside them */
  nftw(upper, walk_fn, 16, FTW_PHYS);
  if (blocks)
    *blocks = tree_blocks;
  return tree_h;
}

/* ---- sandboxes ---------------------------------------------------------- */

static struct sbx_sandbox *make_img(uint64_t disk, struct sbx_error *err)
{
  char id[64];
  snprintf(id, sizeof id, "ov%d_%lu", (int)getpid(), ++seq);
  struct sbx_sandbox_spec spec = {
      .id = id,
      .profile = "test",
      .image = "test/overlay:1",
      .limits = {.memory_bytes = 256 << 20, .pids = 64, .disk_bytes = disk},
      .layers = layers,
      .nlayers = 2,
      .image_digest = "sha256:0123",
  };
  struct sbx_sandbox *sb = NULL;
  if (h_drv->create(&spec, &sb, err) < 0) {
    fprintf(stderr, "create (image): %s\n", err->msg);
    return NULL;
  }
  return sb;
}

/* Runs cmd with sh; returns its stdout (static, trimmed of the last
 * newline) and the exit code in *code. */
static const char *sh(struct sbx_sandbox *sb, const char *cmd, int *code)
{
  static char out[4096];
  struct sbx_exec_result res;
  memset(&res, 0, sizeof res);
  char *o = h_sh(sb, cmd, &res);
  snprintf(out, sizeof out, "%s", o ? o : "(exec failed)");
  size_t n = strlen(out);
  if (n && out[n - 1] == '\n')
    out[n - 1] = '\0';
  if (code)
    *code = o ? res.exit_code : -999;
  if (o && res.exit_code && res.std_err.len)
    fprintf(stderr, "  [%s] stderr: %.300s\n", cmd, res.std_err.buf);
  free(o);
  sbx_exec_result_free(&res);
  return out;
}

static void expect_sh(struct sbx_sandbox *sb, const char *cmd, const char *want)
{
  int code = 0;
  const char *got = sh(sb, cmd, &code);
  check_total++;
  if (strcmp(got, want)) {
    check_failed_count++;
    fprintf(stderr, "FAIL: %s: got \"%s\" (exit %d), want \"%s\"\n", cmd, got, code, want);
  }
}

/* ---- cases -------------------------------------------------------------- */

static void ov_image_view(void)
{
  struct sbx_error err = {0};
  struct sbx_sandbox *sb = make_img(64 << 20, &err);
  CHECK(sb != NULL);
  if (!sb)
    return;
  /* image ownership inside: root-owned files are uid 0 in the sandbox */
  expect_sh(sb, "stat -c '%u %g %a' /data/rootfile", "0 0 644");
  expect_sh(sb, "stat -c '%u %g %a' /shared", "0 0 1777");
  expect_sh(sb, "stat -c '%u %g %a' /data/owned1234", "1234 1234 640");
  expect_sh(sb, "stat -c '%u %a' /bin/busybox /", "0 755\n0 755");
  expect_sh(sb, "cat /data/rootfile /data/upperfile", "lower\nupper");
  /* whiteout and opaque dir */
  expect_sh(sb, "test -e /data/gone; echo $?; ls /data", "1\nowned1234\nrootfile\nupperfile");
  expect_sh(sb, "ls -a /opq", ".\n..\nnew");
  /* a planted redirect is refused (EPERM), never followed to /data */
  expect_sh(sb, "ls /red 2>/dev/null; echo $?", "1");
  /* dirs made in the sandbox rename freely (pip's stash-and-move) */
  expect_sh(sb, "mkdir -p /shared/a/b && mv /shared/a /shared/c && ls /shared/c", "b");
  /* the workload is the sandbox user; /work is its own */
  expect_sh(sb, "id -u; cd; pwd; echo w > /work/f && cat /work/f", "1000\n/work\nw");
  /* /etc is the image's, with the sandbox's hosts, resolv.conf, hostname */
  expect_sh(sb, "head -1 /etc/passwd; cat /etc/hostname",
            "root:x:0:0:root:/root:/bin/sh\nsandbox");
  expect_sh(sb,
            "grep -c image-hosts-file /etc/hosts; grep -c '^127.0.0.1.*localhost' /etc/hosts",
            "0\n1");
  expect_sh(sb, "test -f /etc/resolv.conf && test ! -L /etc/resolv.conf && echo ok", "ok");
  expect_sh(sb, "echo x >> /etc/hosts 2>/dev/null || echo refused", "refused");
  /* copy-on-write: root-owned image files stay the image root's */
  expect_sh(sb, "echo x >> /data/rootfile 2>/dev/null || echo refused", "refused");
  expect_sh(sb, "touch /newfile 2>/dev/null || echo refused", "refused");
  /* the mounts: overlay root nosuid,nodev and rw; no host /usr */
  expect_sh(sb, "grep -c ' / / .*rw,nosuid,nodev.* - overlay ' /proc/self/mountinfo", "1");
  expect_sh(sb, "grep -c ' /usr ' /proc/self/mountinfo", "0");
  expect_sh(sb, "grep -c -E ' /(tmp|work) .* - tmpfs ' /proc/self/mountinfo", "2");
  /* the files API sees the same tree */
  char buf[64] = "";
  int fd = -1;
  if (sbx_sandbox_file_open_read(sb, "/opq/new", &fd, NULL, &err) == 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
  }
  CHECK_STR(buf, "new\n");
  CHECK(sbx_sandbox_file_write(sb, "/shared/api", "a", 1, &err) == 0);
  expect_sh(sb, "cat /shared/api; echo; stat -c %u /shared/api", "a\n1000");
  h_drv->destroy(sb);
}

/* The form the layers took (overlayfs lists them in the root's super
 * options: "lowerdir+=" per layer, or one "lowerdir=a:b" list), and that
 * SANDBOXD_OVERLAY_LAYERS=string really makes the pre-6.7 form: the whole
 * suite runs again under it (meson test isolation-overlay-lowerdir). */
static void ov_layer_form(void)
{
  struct sbx_error err = {0};
  struct sbx_sandbox *sb = make_img(64 << 20, &err);
  CHECK(sb != NULL);
  if (!sb)
    return;
  /* forced: that form; auto: whichever this kernel took (lowerdir+ from 6.7) */
  const char *want = getenv("SANDBOXD_OVERLAY_LAYERS");
  bool list = want && !strcmp(want, "string");
  if (!want)
    list = strcmp(sbx_overlay_layer_form(), "lowerdir") == 0;
  CHECK_STR(sbx_overlay_layer_form(), list ? "lowerdir" : "lowerdir+");
  expect_sh(sb, "grep ' / / ' /proc/self/mountinfo | grep -c 'lowerdir+='", list ? "0" : "1");
  expect_sh(sb, "grep ' / / ' /proc/self/mountinfo | grep -c -E 'lowerdir=[^,]+:'",
            list ? "1" : "0");
  h_drv->destroy(sb);
}

static void ov_setuid_inert(void)
{
  struct sbx_error err = {0};
  struct sbx_sandbox *sb = make_img(64 << 20, &err);
  CHECK(sb != NULL);
  if (!sb)
    return;
  expect_sh(sb, "stat -c '%u %a' /bin/suidprobe", "0 4755");
  int code = 0;
  const char *out = sh(sb, "/bin/suidprobe id", &code);
  CHECK(code == 0);
  CHECK(strstr(out, "uid=1000 gid=1000 euid=1000 ") != NULL);
  printf("setuid-root image binary runs as: %.60s\n", out);
  h_drv->destroy(sb);
}

static void ov_private_and_vanishing(void)
{
  struct sbx_error err = {0};
  struct sbx_sandbox *a = make_img(64 << 20, &err), *b = make_img(64 << 20, &err);
  CHECK(a && b);
  if (a && b) {
    expect_sh(a, "echo mine > /shared/a.txt && cat /shared/a.txt", "mine");
    expect_sh(a, "rm /shared/../data/upperfile 2>/dev/null || echo refused", "refused");
    expect_sh(
        a,
        "mkdir -p /shared/site-packages/pkg && echo 1 > /shared/site-packages/pkg/m.py && echo ok",
        "ok");
    expect_sh(b, "ls -a /shared", ".\n..");
    expect_sh(b, "echo theirs > /shared/a.txt && cat /shared/a.txt", "theirs");
    expect_sh(a, "cat /shared/a.txt", "mine");
  }
  if (a)
    h_drv->destroy(a);
  if (b)
    h_drv->destroy(b);
  struct sbx_sandbox *c = make_img(64 << 20, &err);
  CHECK(c != NULL);
  if (c) {
    expect_sh(c, "ls -a /shared", ".\n..");
    h_drv->destroy(c);
  }
  char p[256];
  snprintf(p, sizeof p, "%s/shared/a.txt", lower);
  CHECK(access(p, F_OK) < 0 && errno == ENOENT);
}

static void ov_disk_limit(void)
{
  struct sbx_error err = {0};
  struct sbx_sandbox *sb = make_img(8 << 20, &err);
  CHECK(sb != NULL);
  if (!sb)
    return;
  int code = 0;
  const char *out =
      sh(sb, "dd if=/dev/zero of=/shared/big bs=1M count=32 2>&1; echo rc=$?", &code);
  CHECK(strstr(out, "No space left") != NULL);
  CHECK(strstr(out, "rc=1") != NULL);
  /* the upper is full; the sandbox is still usable once it frees space */
  expect_sh(sb, "rm /shared/big && echo ok > /shared/small && cat /shared/small", "ok");
  /* inodes are bounded too (disk/16 KiB, at least 1024) */
  /* a builtin's redirection, not touch: 3000 forks outlast the exec's 30 s
   * under emulation on a loaded host (true, not ":": a redirection that
   * fails on a special builtin ends the shell) */
  out = sh(sb,
           "i=0; while [ $i -lt 3000 ]; do { true >/shared/f$i; } 2>/dev/null || break; "
           "i=$((i+1)); done; echo $i",
           &code);
  long made = strtol(out, NULL, 10);
  CHECK(made >= 900 && made < 3000);
  printf("upper at 8 MiB: dd gave ENOSPC, %ld files before the inode cap\n", made);
  h_drv->destroy(sb);
}

static void ov_twenty_share_layers(void)
{
  uint64_t blocks_before = 0, blocks_after = 0;
  uint64_t before = tree_digest(&blocks_before);
  int cg_before = h_cg_dirs(), fds_before = h_fd_count();
  struct sbx_sandbox *sbs[20] = {0};
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  int made = 0;
  for (int i = 0; i < 20; i++)
    if ((sbs[i] = make_img(16 << 20, &err)))
      made++;
  uint64_t t1 = sbx_now_ms();
  CHECK(made == 20);
  printf("20 image sandboxes built cold in %llu ms (%.1f ms each)\n",
         (unsigned long long)(t1 - t0), (double)(t1 - t0) / 20);
  for (int i = 0; i < 20; i++)
    if (sbs[i]) {
      char cmd[96];
      snprintf(cmd, sizeof cmd, "echo %d > /shared/n && cat /shared/n /data/rootfile", i);
      char want[32];
      snprintf(want, sizeof want, "%d\nlower", i);
      expect_sh(sbs[i], cmd, want);
    }
  if (sbs[0])
    expect_sh(sbs[0], "grep -c ' - overlay sbx-image ' /proc/self/mountinfo", "1");
  /* no copies: the layer dirs are exactly as they were, same blocks */
  uint64_t during = tree_digest(&blocks_after);
  CHECK(during == before);
  CHECK(blocks_after == blocks_before);
  /* nothing of it is mounted where the host can see it */
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char line[4096];
  int host_ovl = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "sbx-image") || strstr(line, "sbx-upper") || strstr(line, img_dir))
      host_ovl++;
  if (f)
    fclose(f);
  CHECK(host_ovl == 0);
  for (int i = 0; i < 20; i++)
    if (sbs[i])
      h_drv->destroy(sbs[i]);
  CHECK(h_cg_dirs() == cg_before);
  CHECK(h_fd_count() == fds_before); /* no layer, upper or overlay fd kept */
  CHECK(h_sbx_mount_holders() == 0);
}

static void ov_create_times(void)
{
  struct sbx_limits lim = {.memory_bytes = 256 << 20, .pids = 64};
  struct sbx_error err = {0};
  double host_ms = 0, img_ms = 0;
  for (int i = 0; i < 10; i++) {
    char id[64];
    snprintf(id, sizeof id, "ovh%d_%d", (int)getpid(), i);
    struct sbx_sandbox_spec spec = {.id = id, .profile = "test", .image = "host", .limits = lim};
    struct sbx_sandbox *sb = NULL;
    uint64_t t0 = (sbx_now_ns() / 1000);
    CHECK(h_drv->create(&spec, &sb, &err) == 0);
    host_ms += (double)((sbx_now_ns() / 1000) - t0) / 1000;
    if (sb)
      h_drv->destroy(sb);
    t0 = (sbx_now_ns() / 1000);
    sb = make_img(lim.disk_bytes, &err);
    img_ms += (double)((sbx_now_ns() / 1000) - t0) / 1000;
    CHECK(sb != NULL);
    if (sb)
      h_drv->destroy(sb);
  }
  printf("cold create (pool off), mean of 10: host pack %.1f ms, 2-layer image %.1f ms\n",
         host_ms / 10, img_ms / 10);
}

static void ov_errors_fail_closed(void)
{
  int cg_before = h_cg_dirs();
  static char missing[128];
  snprintf(missing, sizeof missing, "%s/no-such-layer", img_dir);
  const char *bad[] = {lower, missing};
  struct sbx_sandbox_spec spec = {.id = "ovbad",
                                  .profile = "test",
                                  .image = "test/overlay:1",
                                  .limits = {.memory_bytes = 64 << 20},
                                  .layers = bad,
                                  .nlayers = 2};
  struct sbx_sandbox *sb = NULL;
  struct sbx_error err = {0};
  CHECK(h_drv->create(&spec, &sb, &err) < 0 && sb == NULL);
  CHECK(strstr(err.msg, "no-such-layer") != NULL);
  printf("missing layer: %s\n", err.msg);
  CHECK(h_cg_dirs() == cg_before);
  /* an image the core did not resolve, and relative layer paths */
  struct sbx_sandbox_spec unresolved = {.id = "ovbad2",
                                        .profile = "test",
                                        .image = "python:3.12"};
  memset(&err, 0, sizeof err);
  CHECK(h_drv->create(&unresolved, &sb, &err) < 0 && err.code == SBX_E_INVALID);
  const char *rel[] = {"l0"};
  struct sbx_sandbox_spec relspec = {
      .id = "ovbad3", .profile = "test", .image = "x", .layers = rel, .nlayers = 1};
  memset(&err, 0, sizeof err);
  CHECK(h_drv->create(&relspec, &sb, &err) < 0);
}

/* ---- shifted layer copies (image_layer_idmap = off) ---------------------- */

/* Shifted copies (l0@<base>) in img_dir, counted per layer. */
static int count_copies(const char *layer_name)
{
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls -d '%s/%s@'* 2>/dev/null | wc -l", img_dir, layer_name);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f && fscanf(f, "%d", &n) != 1)
    n = -1;
  if (f)
    pclose(f);
  return n;
}

/* Forced: every layer has a copy owned by the sandbox's range, sequential
 * sandboxes add none; idmapped (auto on this kernel): no copy at all. */
static void ov_shifted_copies(void)
{
  bool forced = getenv("SANDBOXD_IMAGE_LAYER_IDMAP") &&
                !strcmp(getenv("SANDBOXD_IMAGE_LAYER_IDMAP"), "off");
  struct sbx_error err = {0};
  struct sbx_sandbox *sb = make_img(64 << 20, &err);
  CHECK(sb != NULL);
  if (!sb)
    return;
  CHECK(sbx_overlay_shifts_layers() == forced);
  CHECK_STR(sbx_overlay_layer_idmap(), forced ? "shifted" : "idmapped");
  int l0 = count_copies("l0"), l1 = count_copies("l1");
  printf("shifted copies after the first cases: l0 %d, l1 %d\n", l0, l1);
  if (!forced) {
    CHECK(l0 == 0 && l1 == 0);
    h_drv->destroy(sb);
    return;
  }
  CHECK(l0 >= 1 && l1 >= 1);
  /* on the host: owned by the sandbox's range, the sandbox sees 0 and 1234 */
  expect_sh(sb, "stat -c '%u %g' /data/rootfile /data/owned1234", "0 0\n1234 1234");
  h_drv->destroy(sb);
  for (int i = 0; i < 5; i++) { /* one at a time: the same range, the same copy */
    sb = make_img(16 << 20, &err);
    CHECK(sb != NULL);
    if (sb)
      h_drv->destroy(sb);
  }
  CHECK(count_copies("l0") == l0 && count_copies("l1") == l1);
}

static int put_caps_v2(const char *p)
{
  /* VFS_CAP_REVISION_2 | effective, permitted = CAP_NET_BIND_SERVICE */
  uint32_t v[5] = {0x02000001u, 1u << 10, 0, 0, 0};
  return setxattr(p, "security.capability", v, sizeof v, 0);
}

/* A layer an attacker made: symlinks out of it (to /etc, to a file beside
 * the layer), a hard link to a file outside the layer, device nodes, a
 * FIFO, ids past the range, a setuid file with file caps, an opaque dir,
 * and a planted temp path (symlink to a victim dir).  The copier must
 * touch nothing outside its copy and copy each entry as what it is. */
static void ov_shift_hostile(void)
{
  char hl[160], p[256], victim[160], sentinel[160];
  snprintf(hl, sizeof hl, "%s/hostile", img_dir);
  snprintf(sentinel, sizeof sentinel, "%s/sentinel", img_dir);
  snprintf(victim, sizeof victim, "%s/victim", img_dir);
  CHECK(mkdir(hl, 0755) == 0 && put_file(img_dir, "sentinel", "host\n", 5, 0600, 0) == 0);
  CHECK(mkdir(victim, 0700) == 0 && put_file(victim, "keep", "v\n", 2, 0600, 0) == 0);
  snprintf(p, sizeof p, "%s/etc", hl);
  CHECK(symlink("/etc", p) == 0);
  snprintf(p, sizeof p, "%s/up", hl);
  CHECK(symlink("../sentinel", p) == 0);
  snprintf(p, sizeof p, "%s/hardlink", hl);
  CHECK(link(sentinel, p) == 0);
  snprintf(p, sizeof p, "%s/null", hl);
  CHECK(mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0);
  snprintf(p, sizeof p, "%s/wh", hl);
  CHECK(mknod(p, S_IFCHR, makedev(0, 0)) == 0);
  snprintf(p, sizeof p, "%s/fifo", hl);
  CHECK(mkfifo(p, 0640) == 0);
  CHECK(put_file(hl, "far", "f\n", 2, 0644, 70000) == 0);
  CHECK(put_file(hl, "suid", "#!/bin/sh\n", 10, 04755, 0) == 0);
  snprintf(p, sizeof p, "%s/suid", hl);
  CHECK(put_caps_v2(p) == 0);
  CHECK(put_file(hl, "a", "same\n", 5, 0644, 5) == 0);
  char a[256];
  snprintf(a, sizeof a, "%s/a", hl);
  snprintf(p, sizeof p, "%s/b", hl);
  CHECK(link(a, p) == 0);
  CHECK(put_dir(hl, "opq", 0750) == 0);
  snprintf(p, sizeof p, "%s/opq", hl);
  CHECK(setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0);
  const uid_t base = 3000000;
  snprintf(p, sizeof p, "%s/.hostile@%u.tmp", img_dir, (unsigned)base);
  CHECK(symlink(victim, p) == 0); /* a planted temp: removed, never followed */
  struct stat etc0, sent0, vic0;
  CHECK(stat("/etc", &etc0) == 0 && stat(sentinel, &sent0) == 0 && stat(victim, &vic0) == 0);

  char copy[PATH_MAX];
  struct sbx_error err = {0};
  uint64_t t0 = sbx_now_ms();
  int r = sbx_shift_layer(hl, base, copy, sizeof copy, &err);
  printf("hostile layer shifted in %llu ms: %s\n", (unsigned long long)(sbx_now_ms() - t0),
         r == 0 ? copy : err.msg);
  CHECK(r == 0);
  /* nothing outside changed */
  struct stat etc1, sent1, vic1, st;
  CHECK(stat("/etc", &etc1) == 0 && etc1.st_uid == etc0.st_uid && etc1.st_mode == etc0.st_mode &&
        etc1.st_mtim.tv_sec == etc0.st_mtim.tv_sec);
  CHECK(stat(sentinel, &sent1) == 0 && sent1.st_uid == 0 && sent1.st_mode == sent0.st_mode &&
        sent1.st_nlink == 2 && sent1.st_size == 5);
  CHECK(stat(victim, &vic1) == 0 && vic1.st_uid == 0 && vic1.st_mode == vic0.st_mode);
  snprintf(p, sizeof p, "%s/keep", victim);
  CHECK(stat(p, &st) == 0 && st.st_uid == 0);
  /* each entry copied as what it is, shifted */
  snprintf(p, sizeof p, "%s/etc", copy);
  char t[64] = "";
  CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid == base &&
        readlink(p, t, sizeof t - 1) == 4 && !strcmp(t, "/etc"));
  snprintf(p, sizeof p, "%s/hardlink", copy);
  CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino != sent0.st_ino &&
        st.st_uid == base && st.st_nlink == 1);
  snprintf(p, sizeof p, "%s/null", copy);
  CHECK(lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3) &&
        st.st_uid == base);
  snprintf(p, sizeof p, "%s/wh", copy);
  CHECK(lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  snprintf(p, sizeof p, "%s/fifo", copy);
  CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0640);
  snprintf(p, sizeof p, "%s/far", copy);
  CHECK(lstat(p, &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
  snprintf(p, sizeof p, "%s/suid", copy);
  CHECK(lstat(p, &st) == 0 && st.st_uid == base && (st.st_mode & 07777) == 04755);
  uint32_t caps[6] = {0};
  CHECK(getxattr(p, "security.capability", caps, sizeof caps) == 24);
  CHECK((caps[0] >> 24) == 3 && caps[1] == (1u << 10) && caps[5] == base);
  struct stat sa, sb;
  snprintf(p, sizeof p, "%s/a", copy);
  CHECK(lstat(p, &sa) == 0 && sa.st_uid == base + 5 && sa.st_nlink == 2);
  snprintf(p, sizeof p, "%s/b", copy);
  CHECK(lstat(p, &sb) == 0 && sb.st_ino == sa.st_ino);
  snprintf(p, sizeof p, "%s/opq", copy);
  char v[4] = "";
  CHECK(getxattr(p, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y');
  CHECK(lstat(p, &st) == 0 && (st.st_mode & 07777) == 0750 && st.st_uid == base);
  CHECK(lstat(copy, &st) == 0 && st.st_uid == base && (st.st_mode & 07777) == 0755);
  /* the tree sits in a dir of root's that the range's host uids cannot enter */
  char wrap[PATH_MAX];
  snprintf(wrap, sizeof wrap, "%s/hostile@%u", img_dir, (unsigned)base);
  CHECK(strlen(copy) > strlen(wrap) && !strncmp(copy, wrap, strlen(wrap)));
  CHECK(lstat(wrap, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) == 0700);
  /* built once: a second call reuses it */
  struct stat c0, c1;
  CHECK(lstat(copy, &c0) == 0);
  char again[PATH_MAX];
  CHECK(sbx_shift_layer(hl, base, again, sizeof again, &err) == 0 && !strcmp(again, copy));
  CHECK(lstat(copy, &c1) == 0 && c1.st_ino == c0.st_ino);
  snprintf(p, sizeof p, "%s/.hostile@%u.tmp", img_dir, (unsigned)base);
  CHECK(lstat(p, &st) < 0 && errno == ENOENT);
}

/* SBX_TEST_LAYERS_ON_OVERLAYFS=1 (meson test isolation-overlay-autodetect):
 * the layers live on an overlayfs mount, which this kernel cannot idmap
 * (mount_setattr gives EINVAL): with image_layer_idmap = auto the first
 * image sandbox must learn that from the kernel's refusal and use shifted
 * copies, as on a host whose store is on such a filesystem. */
static int build_on_overlayfs(void)
{
  char base[64], p[256];
  snprintf(base, sizeof base, "/var/tmp/sbx-ovl-auto-%d", (int)getpid());
  snprintf(img_dir, sizeof img_dir, "%s/m", base);
  static const char *const dirs[] = {"", "/lo", "/up", "/wk", "/m"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(p, sizeof p, "%s%s", base, dirs[i]);
    if (mkdir(p, 0700) < 0)
      return -1;
  }
  char opts[256];
  snprintf(opts, sizeof opts, "lowerdir=%s/lo,upperdir=%s/up,workdir=%s/wk", base, base, base);
  if (mount("sbx-test-store", img_dir, "overlay", 0, opts) < 0)
    return -1;
  snprintf(lower, sizeof lower, "%s/l0", img_dir);
  snprintf(upper, sizeof upper, "%s/l1", img_dir);
  if (mkdir(lower, 0755) < 0 || mkdir(upper, 0755) < 0 || put_dir(lower, "bin", 0755) < 0 ||
      copy_host_file("/bin/busybox", lower, "bin/busybox", 0755) < 0)
    return -1;
  static const char *const applets[] = {"sh", "stat", "cat", "id", NULL};
  for (int i = 0; applets[i]; i++) {
    snprintf(p, sizeof p, "%s/bin/%s", lower, applets[i]);
    if (symlink("busybox", p) < 0)
      return -1;
  }
  return put_dir(lower, "data", 0755) < 0 || put_dir(lower, "tmp", 01777) < 0 ||
                 put_file(lower, "data/rootfile", "lower\n", 6, 0644, 0) < 0 ||
                 put_file(lower, "data/owned1234", "x\n", 2, 0640, 1234) < 0 ||
                 put_dir(upper, "data", 0755) < 0 ||
                 put_file(upper, "data/upperfile", "upper\n", 6, 0644, 0) < 0
             ? -1
             : 0;
}

/* Neither idmapped layers nor their copies (a layer the copier refuses: a
 * mount inside it): fail closed, naming both reasons and the kernel need;
 * nothing learned. */
static void ov_autodetect_neither(void)
{
  static char bad[160];
  char mnt[200];
  snprintf(bad, sizeof bad, "%s/bad", img_dir);
  snprintf(mnt, sizeof mnt, "%s/mnt", bad);
  CHECK(mkdir(bad, 0755) == 0 && mkdir(mnt, 0755) == 0 &&
        mount("sbx-test-inner", mnt, "tmpfs", 0, "size=64k") == 0);
  const char *bad_layers[] = {bad, upper};
  struct sbx_sandbox_spec spec = {.id = "ovneither",
                                  .profile = "test",
                                  .image = "test/overlay:1",
                                  .limits = {.memory_bytes = 64 << 20},
                                  .layers = bad_layers,
                                  .nlayers = 2};
  struct sbx_sandbox *sb = NULL;
  struct sbx_error err = {0};
  CHECK(h_drv->create(&spec, &sb, &err) < 0 && sb == NULL);
  printf("neither idmapped nor shifted: %s\n", err.msg);
  CHECK(err.code == SBX_E_RUNTIME_UNAVAILABLE);
  CHECK(strstr(err.msg, "cannot be idmapped") && strstr(err.msg, "Linux 5.19") &&
        strstr(err.msg, "shifted copies failed too") && strstr(err.msg, "another filesystem"));
  CHECK_STR(sbx_overlay_layer_idmap(), "auto");
  CHECK(umount(mnt) == 0);
}

static void ov_autodetect(void)
{
  CHECK_STR(sbx_overlay_layer_idmap(), "auto");
  ov_autodetect_neither();
  struct sbx_error err = {0};
  struct sbx_sandbox *a = make_img(16 << 20, &err);
  CHECK(a != NULL);
  if (!a)
    return;
  CHECK_STR(sbx_overlay_layer_idmap(), "shifted"); /* learned from the refusal */
  expect_sh(a, "stat -c '%u %g %a' /data/rootfile /data/owned1234; cat /data/upperfile",
            "0 0 644\n1234 1234 640\nupper");
  CHECK(count_copies("l0") == 1 && count_copies("l1") == 1);
  h_drv->destroy(a);
  struct sbx_sandbox *b = make_img(16 << 20, &err);
  CHECK(b != NULL);
  if (b) {
    expect_sh(b, "stat -c %u /data/owned1234", "1234");
    h_drv->destroy(b);
  }
  CHECK(count_copies("l0") == 1 && count_copies("l1") == 1);
}

/* The host pack still gets its RO tmpfs root with the host's /usr. */
static void ov_host_pack_unchanged(void)
{
  struct sbx_sandbox *sb = h_make((struct sbx_limits){.memory_bytes = 128 << 20, .pids = 64});
  CHECK(sb != NULL);
  if (!sb)
    return;
  expect_sh(sb, "grep -c ' / / ro,.* - tmpfs sbx-root ' /proc/self/mountinfo", "1");
  expect_sh(sb, "grep -c ' /usr ro,nosuid,nodev' /proc/self/mountinfo", "1");
  /* no image overlay (the host's own /usr may be on one: the lab's guests) */
  expect_sh(sb, "grep -c ' - overlay sbx-image ' /proc/self/mountinfo", "0");
  h_drv->destroy(sb);
}

static int autodetect_main(void)
{
  if (build_on_overlayfs() < 0) {
    perror("building the test image on overlayfs");
    h_teardown();
    return 1;
  }
  ov_autodetect();
  char cmd[160];
  snprintf(cmd, sizeof cmd, "umount '%s' && rm -rf '%.*s'", img_dir, (int)(strlen(img_dir) - 2),
           img_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", img_dir);
  return h_finish("isolation-overlay-autodetect");
}

int main(void)
{
  /* the store's overlayfs in a mount namespace of this test's own, so it
   * goes with the process whatever happens */
  bool on_ovl = getenv("SBX_TEST_LAYERS_ON_OVERLAYFS") != NULL;
  if (on_ovl &&
      (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)) {
    perror("a mount namespace for the test store");
    return 1;
  }
  int r = h_setup();
  if (r)
    return r;
  if (access("/bin/busybox", X_OK) < 0) {
    h_teardown();
    return check_skip("isolation-overlay: needs busybox-static at /bin/busybox");
  }
  if (on_ovl)
    return autodetect_main();
  if (build_image() < 0) {
    perror("building the test image");
    h_teardown();
    return 1;
  }
  uint64_t digest_before = tree_digest(NULL);
  ov_image_view();
  ov_layer_form();
  ov_setuid_inert();
  ov_private_and_vanishing();
  ov_disk_limit();
  ov_twenty_share_layers();
  ov_create_times();
  ov_errors_fail_closed();
  ov_host_pack_unchanged();
  ov_shifted_copies();
  ov_shift_hostile();
  CHECK(tree_digest(NULL) == digest_before); /* the layers never changed */
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", img_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", img_dir);
  return h_finish("isolation-overlay");
}
