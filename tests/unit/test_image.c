/* test_image.c — the image module without a registry: reference
 * normalisation, digests and a corrupted stored blob, hostile layer tars
 * (built here with libarchive) refused or neutralised with nothing written
 * outside the layer, whiteouts and opaque directories in overlayfs form,
 * and a real store round trip: import of an OCI layout written here, get
 * (hold), rm, gc keeps the held layer, release, gc removes it. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "image/image.h"
#include "image/image_int.h"

static char base[PATH_MAX];

/* ---- references ---------------------------------------------------------- */

static void test_refs(void)
{
  static const struct {
    const char *in, *canonical, *registry, *repo, *tag;
    bool plain;
  } ok[] = {
      {"python:3.12-slim", "docker.io/library/python:3.12-slim", "registry-1.docker.io",
       "library/python", "3.12-slim", false},
      {"python", "docker.io/library/python:latest", "registry-1.docker.io", "library/python",
       "latest", false},
      {"user/app", "docker.io/user/app:latest", "registry-1.docker.io", "user/app", "latest",
       false},
      {"docker.io/python", "docker.io/library/python:latest", "registry-1.docker.io",
       "library/python", "latest", false},
      {"index.docker.io/library/python:3", "docker.io/library/python:3", "registry-1.docker.io",
       "library/python", "3", false},
      {"ghcr.io/org/tool:v1.2", "ghcr.io/org/tool:v1.2", "ghcr.io", "org/tool", "v1.2", false},
      {"127.0.0.1:5000/t/busybox:1", "127.0.0.1:5000/t/busybox:1", "127.0.0.1:5000", "t/busybox",
       "1", true},
      {"127.8.9.10/x", "127.8.9.10/x:latest", "127.8.9.10", "x", "latest", true},
      {"localhost:5000/x", "localhost:5000/x:latest", "localhost:5000", "x", "latest", true},
      {"localhost/x", "localhost/x:latest", "localhost", "x", "latest", true},
      {"[::1]:5000/a/b:c", "[::1]:5000/a/b:c", "[::1]:5000", "a/b", "c", true},
      {"128.0.0.1:5000/x", "128.0.0.1:5000/x:latest", "128.0.0.1:5000", "x", "latest", false},
      {"registry.example.com:443/a/b-c__d.e:t_1", "registry.example.com:443/a/b-c__d.e:t_1",
       "registry.example.com:443", "a/b-c__d.e", "t_1", false},
      {"localhost", "docker.io/library/localhost:latest", "registry-1.docker.io",
       "library/localhost", "latest", false},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    struct sbx_image_ref r;
    struct sbx_error err = {0};
    CHECK(sbx_image_ref_parse(ok[i].in, "image", &r, &err) == 0);
    CHECK_STR(r.canonical, ok[i].canonical);
    CHECK_STR(r.registry, ok[i].registry);
    CHECK_STR(r.repository, ok[i].repo);
    CHECK_STR(r.tag, ok[i].tag);
    CHECK(r.plain_http == ok[i].plain);
  }
  const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char in[200], want[200];
  snprintf(in, sizeof in, "python@sha256:%s", hex);
  snprintf(want, sizeof want, "docker.io/library/python@sha256:%s", hex);
  struct sbx_image_ref r;
  struct sbx_error err = {0};
  CHECK(sbx_image_ref_parse(in, "image", &r, &err) == 0);
  CHECK_STR(r.canonical, want);
  CHECK_STR(r.tag, "");
  CHECK(!strncmp(r.digest, "sha256:", 7));
  snprintf(in, sizeof in, "127.0.0.1:5000/a:1.0@sha256:%s", hex);
  CHECK(sbx_image_ref_parse(in, "image", &r, &err) == 0);
  CHECK_STR(r.tag, "1.0");
  CHECK(r.digest[0] != '\0');

  static const char *const bad[] = {
      "",
      "Python",
      "python:",
      "python:bad tag",
      "python@sha256:abc",
      "python@md5:",
      "/python",
      "python/",
      "a//b",
      "-a",
      "a-",
      "ex ample/x",
      "host:port/x",
      "a/b:c:d",
      "python:-x",
      "docker.io/",
      "a..b",
      "x@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
      "[::1/x",
      "ex\xc3\xa9/x",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct sbx_error e = {0};
    int rc = sbx_image_ref_parse(bad[i], "image", &r, &e);
    if (rc == 0)
      fprintf(stderr, "accepted bad ref '%s' → %s\n", bad[i], r.canonical);
    CHECK(rc < 0 && e.code == SBX_E_INVALID && !strcmp(e.field, "image"));
  }
}

/* ---- digests ------------------------------------------------------------- */

static void test_digests(void)
{
  char d[IMG_DIGEST_LEN];
  img_digest_buf("", 0, d);
  CHECK_STR(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  img_digest_buf("abc", 3, d);
  CHECK_STR(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(img_digest_valid(d));
  CHECK(!img_digest_valid(
      "sha256:BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  CHECK(!img_digest_valid(
      "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  CHECK(!img_digest_valid("sha256:../../etc/passwd"));
  struct sbx_error err = {0};
  CHECK(img_digest_check("x", d, d, &err) == 0);
  CHECK(img_digest_check("x", d, "sha256:00", &err) < 0 && strstr(err.msg, "digest mismatch"));

  /* a stored blob corrupted on disk is caught when read back */
  char bd[IMG_DIGEST_LEN], p[PATH_MAX];
  CHECK(img_blob_put("hello blob", 10, bd, &err) == 0);
  char *out;
  size_t len;
  CHECK(img_blob_read(bd, 1024, &out, &len, &err) == 0 && len == 10);
  free(out);
  img_blob_path(bd, p, sizeof p);
  FILE *f = fopen(p, "w");
  fputs("hellO blob", f);
  fclose(f);
  sbx_err_clear(&err);
  CHECK(img_blob_read(bd, 1024, &out, &len, &err) < 0 && strstr(err.msg, "digest mismatch"));
  unlink(p);
}

/* ---- hostile tars -------------------------------------------------------- */

enum kind { F, D, SYM, HARD, CHR, FIFO };
struct ent {
  const char *name;
  enum kind kind;
  const char *data; /* content, link target */
  int mode;
};

/* Writes a tar (gzip when gz) of ents to path. */
static void make_tar(const char *path, const struct ent *ents, size_t n, bool gz)
{
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gz)
    archive_write_add_filter_gzip(a);
  archive_write_open_filename(a, path);
  for (size_t i = 0; i < n; i++) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, ents[i].name);
    archive_entry_set_mtime(e, 1700000000, 0);
    int mode = ents[i].mode;
    switch (ents[i].kind) {
    case F:
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, (la_int64_t)strlen(ents[i].data ? ents[i].data : ""));
      break;
    case D:
      archive_entry_set_filetype(e, AE_IFDIR);
      break;
    case SYM:
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, ents[i].data);
      break;
    case HARD:
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_hardlink(e, ents[i].data);
      break;
    case CHR:
      archive_entry_set_filetype(e, AE_IFCHR);
      archive_entry_set_rdev(e, makedev(1, 3));
      break;
    case FIFO:
      archive_entry_set_filetype(e, AE_IFIFO);
      break;
    }
    archive_entry_set_perm(e, mode ? (mode_t)mode : (ents[i].kind == D ? 0755 : 0644));
    archive_write_header(a, e);
    if (ents[i].kind == F && ents[i].data)
      archive_write_data(a, ents[i].data, strlen(ents[i].data));
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

/* Unpacks ents into a fresh <base>/jail/layer; returns the unpack result.
 * The jail dir is where an escape would land: it must hold only "layer". */
static int unpack_ents(const struct ent *ents, size_t n, char *layer, size_t len,
                       struct sbx_error *err)
{
  char jail[PATH_MAX], tar[PATH_MAX];
  snprintf(jail, sizeof jail, "%s/jail", base);
  sbx_rm_rf(jail);
  mkdir(jail, 0755);
  snprintf(layer, len, "%s/layer", jail);
  mkdir(layer, 0755);
  snprintf(tar, sizeof tar, "%s/t.tar.gz", base);
  make_tar(tar, ents, n, true);
  int fd = open(tar, O_RDONLY);
  int rc = img_unpack_layer(fd, layer, err);
  close(fd);
  return rc;
}

static int jail_entries(void)
{
  char jail[PATH_MAX];
  snprintf(jail, sizeof jail, "%s/jail", base);
  DIR *d = opendir(jail);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  if (d)
    closedir(d);
  return n;
}

static bool exists_at(const char *dir, const char *rel)
{
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  struct stat st;
  return lstat(p, &st) == 0;
}

static void test_hostile(void)
{
  char layer[PATH_MAX], abs_target[PATH_MAX];
  struct sbx_error err = {0};
  snprintf(abs_target, sizeof abs_target, "%s/abs-escape", base);
  const struct ent dotdot[] = {{"ok", F, "x", 0}, {"../evil", F, "pwned", 0}};
  CHECK(unpack_ents(dotdot, 2, layer, sizeof layer, &err) < 0 && strstr(err.msg, "hostile"));
  CHECK(jail_entries() == 1 && !exists_at(base, "jail/evil"));

  const struct ent deep[] = {{"a/b/../../../evil2", F, "pwned", 0}};
  CHECK(unpack_ents(deep, 1, layer, sizeof layer, &err) < 0);
  CHECK(jail_entries() == 1);

  const struct ent abs[] = {{abs_target, F, "pwned", 0}};
  CHECK(unpack_ents(abs, 1, layer, sizeof layer, &err) < 0);
  CHECK(access(abs_target, F_OK) < 0);

  const struct ent hl[] = {{"h", HARD, "../../outside", 0}};
  CHECK(unpack_ents(hl, 1, layer, sizeof layer, &err) < 0 && strstr(err.msg, "hard link"));
  CHECK(jail_entries() == 1);

  /* a symlink to / then a file through it: the symlink is legal content,
   * writing through it is not */
  const struct ent through[] = {{"esc", SYM, "/", 0}, {"esc/tmp/sbx-pwned", F, "x", 0}};
  CHECK(unpack_ents(through, 2, layer, sizeof layer, &err) < 0);
  CHECK(access("/tmp/sbx-pwned", F_OK) < 0);
  const struct ent up[] = {{"up", SYM, "..", 0}, {"up/evil3", F, "x", 0}};
  CHECK(unpack_ents(up, 2, layer, sizeof layer, &err) < 0);
  CHECK(jail_entries() == 1);
  /* hard link whose target path goes through a symlink out of the layer */
  const struct ent hlsym[] = {{"up", SYM, "..", 0}, {"h", HARD, "up/layer", 0}};
  CHECK(unpack_ents(hlsym, 2, layer, sizeof layer, &err) < 0);
  /* whiteout below a symlinked directory would create a node outside */
  const struct ent whsym[] = {{"up", SYM, "..", 0}, {"up/.wh.victim", F, "", 0}};
  CHECK(unpack_ents(whsym, 2, layer, sizeof layer, &err) < 0);
  CHECK(jail_entries() == 1);

  /* neutralised, not refused: device nodes skipped, setuid/setgid cleared,
   * escaping symlinks created as symlinks, inner hard links kept */
  const struct ent benign[] = {
      {"dev", D, NULL, 0},
      {"dev/null", CHR, NULL, 0},
      {"bin", D, NULL, 0},
      {"bin/su", F, "#!/bin/sh\n", 04755},
      {"bin/sg", F, "x", 02755},
      {"etc", D, NULL, 0},
      {"etc/link", SYM, "/etc/shadow", 0},
      {"etc/rel", SYM, "../../..", 0},
      {"bin/su2", HARD, "bin/su", 0},
      {"fifo", FIFO, NULL, 0},
      {"./a//b/", D, NULL, 0},
      {"./a/b/c", F, "c", 0},
      /* later entries replace earlier ones; a file over a symlink replaces
       * the symlink, never writes to its target */
      {"dup", F, "1", 0},
      {"dup", F, "22", 0},
      {"sl", SYM, "/etc/passwd", 0},
      {"sl", F, "z", 0},
  };
  sbx_err_clear(&err);
  CHECK(unpack_ents(benign, sizeof benign / sizeof benign[0], layer, sizeof layer, &err) == 0);
  if (err.msg[0])
    fprintf(stderr, "benign: %s\n", err.msg);
  struct stat st, st2;
  char p[PATH_MAX * 2], t[PATH_MAX];
  CHECK(!exists_at(layer, "dev/null"));
  snprintf(p, sizeof p, "%s/bin/su", layer);
  CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
  snprintf(p, sizeof p, "%s/bin/sg", layer);
  CHECK(stat(p, &st2) == 0 && (st2.st_mode & 07777) == 0755);
  snprintf(p, sizeof p, "%s/bin/su2", layer);
  CHECK(stat(p, &st2) == 0 && st2.st_ino == st.st_ino);
  snprintf(p, sizeof p, "%s/etc/link", layer);
  ssize_t n = readlink(p, t, sizeof t - 1);
  CHECK(n == 11 && !memcmp(t, "/etc/shadow", 11));
  CHECK(exists_at(layer, "a/b/c") && exists_at(layer, "fifo"));
  snprintf(p, sizeof p, "%s/dup", layer);
  CHECK(stat(p, &st) == 0 && st.st_size == 2);
  snprintf(p, sizeof p, "%s/sl", layer);
  CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 1);
  CHECK(jail_entries() == 1);
}

static void test_whiteouts(void)
{
  char layer[PATH_MAX], p[PATH_MAX * 2];
  struct sbx_error err = {0};
  const struct ent ents[] = {
      {"etc", D, NULL, 0},
      {"etc/.wh.passwd", F, "", 0},
      {"var/cache/.wh..wh..opq", F, "", 0}, /* its directory created on the way */
      {"var/cache/new", F, "n", 0},
      {"opt", D, NULL, 0},
      {"opt/.wh..wh..opq", F, "", 0},
  };
  CHECK(unpack_ents(ents, sizeof ents / sizeof ents[0], layer, sizeof layer, &err) == 0);
  struct stat st;
  snprintf(p, sizeof p, "%s/etc/passwd", layer);
  CHECK(lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
  CHECK(!exists_at(layer, "etc/.wh.passwd"));
  char v[4] = "";
  snprintf(p, sizeof p, "%s/var/cache", layer);
  CHECK(getxattr(p, "trusted.overlay.opaque", v, sizeof v) == 1 && v[0] == 'y');
  snprintf(p, sizeof p, "%s/opt", layer);
  CHECK(getxattr(p, "trusted.overlay.opaque", v, sizeof v) == 1);
  CHECK(!exists_at(layer, "opt/.wh..wh..opq") && exists_at(layer, "var/cache/new"));
  const struct ent bad[] = {{".wh..", F, "", 0}};
  CHECK(unpack_ents(bad, 1, layer, sizeof layer, &err) < 0);
}

/* ---- store round trip ---------------------------------------------------- */

static void write_file(const char *dir, const char *name, const void *buf, size_t len)
{
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  fwrite(buf, 1, len, f);
  fclose(f);
}

static void write_blob(const char *layout, const void *buf, size_t len, char *digest)
{
  img_digest_buf(buf, len, digest);
  char name[100];
  snprintf(name, sizeof name, "blobs/sha256/%s", digest + 7);
  write_file(layout, name, buf, len);
}

/* An OCI layout with one gzip layer, written by hand. */
static void make_layout(const char *layout, char *layer_digest)
{
  char p[PATH_MAX], tar[PATH_MAX];
  snprintf(p, sizeof p, "%s/blobs/sha256", layout);
  sbx_mkdir_p(p, 0755);
  const struct ent ents[] = {{"hello", F, "world", 0}};
  snprintf(tar, sizeof tar, "%s/layer.tgz", base);
  make_tar(tar, ents, 1, true);
  static char buf[1 << 16];
  FILE *f = fopen(tar, "r");
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  write_blob(layout, buf, n, layer_digest);
  char cfg[512], cd[IMG_DIGEST_LEN], man[1024], md[IMG_DIGEST_LEN], idx[512];
  snprintf(cfg, sizeof cfg,
           "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"Env\":[\"A=1\"],"
           "\"WorkingDir\":\"/w\",\"User\":\"1000:1000\",\"Entrypoint\":[\"/bin/sh\"],"
           "\"Cmd\":[\"-c\",\"true\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":"
           "[\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"]}}");
  write_blob(layout, cfg, strlen(cfg), cd);
  snprintf(man, sizeof man,
           "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
           "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"size\":%zu,"
           "\"digest\":\"%s\"},\"layers\":[{\"mediaType\":"
           "\"application/vnd.oci.image.layer.v1.tar+gzip\",\"size\":%zu,\"digest\":\"%s\"}]}",
           strlen(cfg), cd, n, layer_digest);
  write_blob(layout, man, strlen(man), md);
  snprintf(idx, sizeof idx,
           "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
           "\"application/vnd.oci.image.manifest.v1+json\",\"size\":%zu,\"digest\":\"%s\"}]}",
           strlen(man), md);
  write_file(layout, "index.json", idx, strlen(idx));
  write_file(layout, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
}

static void test_store(void)
{
  char layout[PATH_MAX], ld[IMG_DIGEST_LEN], canon[700], lp[PATH_MAX];
  struct sbx_error err = {0};
  snprintf(layout, sizeof layout, "%s/layout", base);
  make_layout(layout, ld);
  CHECK(sbx_image_import(layout, NULL, canon, &err) < 0 && !strcmp(err.field, "name"));
  sbx_err_clear(&err);
  CHECK(sbx_image_import(layout, "test/one:1", canon, &err) == 0);
  if (err.msg[0])
    fprintf(stderr, "import: %s\n", err.msg);
  CHECK_STR(canon, "docker.io/test/one:1");

  struct sbx_image *img = NULL, *img2 = NULL;
  CHECK(sbx_image_get("test/one:1", SBX_IMAGE_PULL_NEVER, &img, &err) == 0);
  CHECK(sbx_image_get("docker.io/test/one:1", SBX_IMAGE_PULL_NEVER, &img2, &err) == 0);
  CHECK(img && img == img2); /* one struct per image, refcounted */
  sbx_image_release(img2);
  CHECK(sbx_image_get("test/missing", SBX_IMAGE_PULL_NEVER, &img2, &err) < 0 &&
        err.code == SBX_E_NOT_FOUND);
  if (!img)
    return;
  CHECK(img->nlayers == 1);
  img_layer_path(ld, lp, sizeof lp);
  CHECK_STR(img->layers[0], lp);
  CHECK(exists_at(lp, "hello"));
  CHECK_STR(img->env[0], "A=1");
  CHECK(img->env[1] == NULL);
  CHECK_STR(img->workdir, "/w");
  CHECK_STR(img->user, "1000:1000");
  CHECK_STR(img->entrypoint[0], "/bin/sh");
  CHECK_STR(img->cmd[1], "true");

  json_t *list;
  CHECK(sbx_image_list(&list, &err) == 0 && json_array_size(list) == 1);
  json_decref(list);
  CHECK(sbx_image_remove("test/one:1", &err) == 0);
  CHECK(sbx_image_remove("test/one:1", &err) < 0 && err.code == SBX_E_NOT_FOUND);

  struct sbx_image_gc_stats st;
  CHECK(sbx_image_gc(&st, &err) == 0);
  CHECK(st.layers_in_use == 1 && st.layers_removed == 0 && st.blobs_removed >= 3);
  CHECK(exists_at(lp, "hello")); /* held: kept */
  sbx_image_release(img);
  CHECK(sbx_image_gc(&st, &err) == 0);
  CHECK(st.layers_removed == 1 && st.layers_in_use == 0);
  CHECK(access(lp, F_OK) < 0);
}

int main(void)
{
  snprintf(base, sizeof base, "/tmp/sbx-test-image-%d", (int)getpid());
  sbx_rm_rf(base);
  mkdir(base, 0755);
  struct sbx_error err = {0};
  char state[PATH_MAX];
  snprintf(state, sizeof state, "%s/state", base);
  if (sbx_image_store_open(state, &err) < 0) {
    fprintf(stderr, "store open: %s\n", err.msg);
    return 1;
  }
  /* canonicalise base too: the unpacker wants a symlink-free path */
  char real[PATH_MAX];
  if (realpath(base, real))
    snprintf(base, sizeof base, "%s", real);
  CHECK_CASE(test_refs);
  CHECK_CASE(test_digests);
  if (geteuid() == 0) { /* owners, mknod and trusted.* xattrs need root */
    CHECK_CASE(test_hostile);
    CHECK_CASE(test_whiteouts);
    CHECK_CASE(test_store);
  } else {
    check_skip_part("not root: unpack and store tests");
  }
  sbx_rm_rf(base);
  return check_finish("image");
}
