/* build.c — `sandboxd image build`: a single-layer OCI image made from
 * Debian packages with mmdebstrap, for users without Docker.
 *
 * Steps (sbx_image_build): validate the request; find the apt sources
 * (the host's own entries for the suite, or --mirror); run mmdebstrap into
 * an uncompressed tar under the store's tmp/; gzip it into an OCI layout
 * (layer, config, manifest, index.json) while hashing both forms; hand the
 * layout to sbx_image_import, so a built image is stored, verified and
 * unpacked exactly like an imported one.
 *
 * Why the host's sources and not mmdebstrap's default (deb.debian.org plus
 * updates/security): the host reaches Debian only the way its apt is
 * configured (a local mirror, a snapshot, a proxy); a builder that picked
 * its own address would either fail or contact something the operator never
 * allowed.  The host's Acquire::Check-Valid-Until/Check-Date/proxy settings
 * are carried over for the same reason; they are removed from the image.
 *
 * Reproducibility: SOURCE_DATE_EPOCH (the environment's, else the start of
 * the current UTC day) is given to mmdebstrap, which then clamps mtimes and
 * drops logs, caches and package lists; we also empty /etc/resolv.conf and
 * /etc/hostname (copied from the host otherwise) and gzip with a zero
 * header time, so the same packages from the same mirror content build the
 * same digest. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "image/image_int.h"

#define MAX_PACKAGES 64
#define MAX_PKG_NAME 100
#define MAX_SOURCES_FILE (1u << 20)
#define MAX_SOURCE_FILES 256
#define MAX_LINE 1024
#define TAIL_LEN 1500 /* what of mmdebstrap's stderr a failure reports */

#define MEDIA_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MEDIA_CONFIG "application/vnd.oci.image.config.v1+json"
#define MEDIA_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"
#define IMAGE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* A cleaned-up request. */
struct plan {
  char suite[33];
  char *pkgs[MAX_PACKAGES]; /* sorted, unique; owned */
  size_t npkgs;
  char pkglist[MAX_PACKAGES * (MAX_PKG_NAME + 1)]; /* "a,b,c" */
  const char *variant;
  char arch[65]; /* OCI architecture of the host (mmdebstrap builds native) */
  struct sbx_image_ref ref;
  int64_t epoch;
  const struct sbx_image_build *b;
};

static void note(const struct plan *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const struct plan *p, const char *fmt, ...)
{
  char line[MAX_LINE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (p->b->progress)
    p->b->progress(p->b->ud, line);
  else
    sbx_info(IMG_SUB, "build %s: %s", p->ref.canonical, line);
}

/* ---- validation ----------------------------------------------------------- */

/* Debian policy 5.6.1: [a-z0-9][a-z0-9+.-]+ */
static bool pkg_name_ok(const char *s, size_t n)
{
  if (n < 2 || n > MAX_PKG_NAME ||
      !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '+' ||
          s[i] == '.' || s[i] == '-'))
      return false;
  return true;
}

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int parse_packages(const char *text, struct plan *p, struct sbx_error *err)
{
  if (!text || !*text)
    return sbx_err_field(err, "packages", "--packages needs at least one Debian package name");
  for (const char *s = text; *s;) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n > 0) {
      if (!pkg_name_ok(s, n))
        return sbx_err_field(err, "packages",
                             "'%.*s' is not a Debian package name ([a-z0-9][a-z0-9+.-]+)",
                             (int)(n > 100 ? 100 : n), s);
      if (p->npkgs == MAX_PACKAGES)
        return sbx_err_field(err, "packages", "more than %d packages", MAX_PACKAGES);
      if (!(p->pkgs[p->npkgs++] = strndup(s, n)))
        return sbx_err_sys(err, ENOMEM, "packages");
    }
    s = e ? e + 1 : s + n;
  }
  if (!p->npkgs)
    return sbx_err_field(err, "packages", "--packages needs at least one Debian package name");
  qsort(p->pkgs, p->npkgs, sizeof *p->pkgs, cmp_str);
  size_t o = 0, len = 0;
  for (size_t i = 0; i < p->npkgs; i++) {
    if (o && !strcmp(p->pkgs[o - 1], p->pkgs[i])) {
      free(p->pkgs[i]);
      continue;
    }
    p->pkgs[o++] = p->pkgs[i];
  }
  p->npkgs = o;
  for (size_t i = 0; i < p->npkgs; i++)
    len += (size_t)snprintf(p->pkglist + len, sizeof p->pkglist - len, "%s%s", i ? "," : "",
                            p->pkgs[i]);
  return 0;
}

static int parse_from(const char *from, struct plan *p, struct sbx_error *err)
{
  const char *s = from && !strncmp(from, "debian:", 7) ? from + 7 : NULL;
  size_t n = s ? strlen(s) : 0;
  bool ok = s && n >= 2 && n < sizeof p->suite && islower((unsigned char)s[0]);
  for (size_t i = 0; ok && i < n; i++)
    ok = islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-';
  if (!ok)
    return sbx_err_field(err, "from",
                         "--from must be debian:SUITE (e.g. debian:bookworm), not '%.100s'",
                         from ? from : "");
  snprintf(p->suite, sizeof p->suite, "%s", s);
  return 0;
}

static bool mirror_ok(const char *m)
{
  if (strncmp(m, "http://", 7) && strncmp(m, "https://", 8) && strncmp(m, "file:///", 8))
    return false;
  if (strlen(m) > 512)
    return false;
  for (const char *c = m; *c; c++) /* one token in a sources line */
    if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f || *c == '[' || *c == ']' ||
        *c == '#')
      return false;
  return true;
}

static int64_t build_epoch(void)
{
  const char *e = getenv("SOURCE_DATE_EPOCH");
  if (e && *e && strlen(e) <= 12 && strspn(e, "0123456789") == strlen(e))
    return strtoll(e, NULL, 10);
  int64_t now = sbx_wall_s();
  return now - now % 86400;
}

static void oci_arch(char *out, size_t len)
{
  struct utsname u;
  const char *a = uname(&u) < 0 ? "amd64" : u.machine;
  if (!strcmp(a, "x86_64"))
    a = "amd64";
  else if (!strcmp(a, "aarch64"))
    a = "arm64";
  snprintf(out, len, "%s", a);
}

static int plan_new(const struct sbx_image_build *b, struct plan *p, struct sbx_error *err)
{
  memset(p, 0, sizeof *p);
  p->b = b;
  if (parse_from(b->from, p, err) < 0 || parse_packages(b->packages, p, err) < 0)
    return -1;
  p->variant = b->variant && *b->variant ? b->variant : "apt";
  if (strcmp(p->variant, "apt") && strcmp(p->variant, "minbase") &&
      strcmp(p->variant, "essential"))
    return sbx_err_field(err, "variant", "--variant is essential, apt or minbase");
  if (b->mirror && !mirror_ok(b->mirror))
    return sbx_err_field(err, "mirror",
                         "--mirror must be an http://, https:// or file:/// URL without spaces");
  if (!b->name || !*b->name)
    return sbx_err_field(err, "name", "--name is required");
  if (sbx_image_ref_parse(b->name, "name", &p->ref, err) < 0)
    return -1;
  if (p->ref.digest[0])
    return sbx_err_field(err, "name", "--name takes a name[:tag], not a digest");
  p->epoch = build_epoch();
  oci_arch(p->arch, sizeof p->arch);
  return 0;
}

static void plan_free(struct plan *p)
{
  for (size_t i = 0; i < p->npkgs; i++)
    free(p->pkgs[i]);
  p->npkgs = 0;
}

static bool plan_has(const struct plan *p, const char *pkg)
{
  for (size_t i = 0; i < p->npkgs; i++)
    if (!strcmp(p->pkgs[i], pkg))
      return true;
  return false;
}

/* ---- the host's apt sources, narrowed to the suite ------------------------- */

static bool suite_wanted(const char *s, size_t n, const char *suite)
{
  size_t sl = strlen(suite);
  if (n < sl || strncmp(s, suite, sl))
    return false;
  const char *rest = s + sl;
  size_t rn = n - sl;
  return rn == 0 || (rn == 8 && !strncmp(rest, "-updates", 8)) ||
         (rn == 9 && !strncmp(rest, "-security", 9));
}

/* Filtered "Suites:" words of a value; "" when none is wanted. */
static void filter_suites(const char *val, const char *suite, char *out, size_t len)
{
  size_t o = 0;
  out[0] = '\0';
  for (const char *s = val; *s;) {
    s += strspn(s, " \t\n");
    size_t n = strcspn(s, " \t\n");
    if (n && suite_wanted(s, n, suite) && o + n + 2 < len)
      o += (size_t)snprintf(out + o, len - o, "%s%.*s", o ? " " : "", (int)n, s);
    s += n;
  }
}

static bool word_in(const char *val, const char *word)
{
  size_t wl = strlen(word);
  for (const char *s = val; *s;) {
    s += strspn(s, " \t\n");
    size_t n = strcspn(s, " \t\n");
    if (n == wl && !strncasecmp(s, word, n))
      return true;
    s += n;
  }
  return false;
}

/* A deb822 field's value from v (just after "Key:"), continuation lines
 * joined with spaces. */
static void field_value(const char *v, char *out, size_t len)
{
  size_t o = 0;
  for (; *v && o + 1 < len; v++) {
    if (*v == '\n') {
      if (v[1] != ' ' && v[1] != '\t')
        break;
      out[o++] = ' ';
    } else {
      out[o++] = *v;
    }
  }
  out[o] = '\0';
}

/* One deb822 stanza (fields "Key: value", continuation lines start with
 * a blank): re-emitted with Suites narrowed; skipped unless it is an
 * enabled "deb" entry with a wanted suite. */
static void deb822_stanza(char *st, const char *suite, FILE *out, unsigned *found)
{
  const char *types = NULL, *suites = NULL, *enabled = NULL;
  for (char *l = st; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (*l == ' ' || *l == '\t' || *l == '#')
      continue;
    char *colon = strchr(l, ':'), *nl = strchr(l, '\n');
    if (!colon || (nl && colon > nl))
      continue;
    const char *v = colon + 1 + strspn(colon + 1, " \t");
    if (!strncasecmp(l, "Types:", 6))
      types = v;
    else if (!strncasecmp(l, "Suites:", 7))
      suites = v;
    else if (!strncasecmp(l, "Enabled:", 8))
      enabled = v;
  }
  char want[512], val[1024];
  if (!types || !suites)
    return;
  field_value(types, val, sizeof val);
  if (!word_in(val, "deb"))
    return;
  if (enabled && !strncasecmp(enabled, "no", 2))
    return;
  field_value(suites, val, sizeof val);
  filter_suites(val, suite, want, sizeof want);
  if (!want[0])
    return;
  bool skipping = false; /* inside a field we rewrite (Types, Suites) */
  for (char *l = st; l && *l;) {
    char *nl = strchr(l, '\n');
    size_t n = nl ? (size_t)(nl - l) : strlen(l);
    bool cont = *l == ' ' || *l == '\t';
    if (!cont)
      skipping = false;
    if (*l == '#' || (cont && skipping)) {
      /* dropped */
    } else if (!strncasecmp(l, "Types:", 6)) {
      fprintf(out, "Types: deb\n");
      skipping = true;
    } else if (!strncasecmp(l, "Suites:", 7)) {
      fprintf(out, "Suites: %s\n", want);
      skipping = true;
    } else {
      fprintf(out, "%.*s\n", (int)n, l);
    }
    l = nl ? nl + 1 : NULL;
  }
  fputc('\n', out);
  (*found)++;
}

static void deb822_file(char *text, const char *suite, FILE *out, unsigned *found)
{
  /* stanzas are separated by lines holding only blanks */
  char *s = text;
  while (*s) {
    char *end = s;
    for (;;) {
      char *nl = strchr(end, '\n');
      if (!nl) {
        end += strlen(end);
        break;
      }
      char *next = nl + 1;
      if (*next == '\0' || next[strspn(next, " \t")] == '\n') {
        *nl = '\0';
        end = next + strspn(next, " \t");
        if (*end == '\n')
          end++;
        break;
      }
      end = next;
    }
    char *stanza = s;
    s = end;
    if (*stanza)
      deb822_stanza(stanza, suite, out, found);
  }
}

/* "deb [opt=v …] URI SUITE COMP…" → a deb822 stanza. */
static void oneline_entry(char *l, const char *suite, FILE *out, unsigned *found)
{
  char *hash = strchr(l, '#');
  if (hash)
    *hash = '\0';
  char *save = NULL, *tok = strtok_r(l, " \t", &save);
  if (!tok || strcmp(tok, "deb"))
    return;
  char opts[512] = "";
  tok = strtok_r(NULL, " \t", &save);
  if (tok && tok[0] == '[') {
    size_t o = 0;
    for (tok++; tok; tok = strtok_r(NULL, " \t", &save)) {
      char *close = strchr(tok, ']');
      if (close)
        *close = '\0';
      if (*tok && o + strlen(tok) + 2 < sizeof opts)
        o += (size_t)snprintf(opts + o, sizeof opts - o, "%s ", tok);
      if (close) {
        tok = close[1] ? close + 1 : strtok_r(NULL, " \t", &save);
        break;
      }
    }
  }
  char *uri = tok, *s = uri ? strtok_r(NULL, " \t", &save) : NULL;
  char *comp = s ? strtok_r(NULL, " \t", &save) : NULL;
  if (!comp || !suite_wanted(s, strlen(s), suite))
    return; /* no components: not a valid entry */
  fprintf(out, "Types: deb\nURIs: %s\nSuites: %s\nComponents: %s", uri, s, comp);
  for (char *c; (c = strtok_r(NULL, " \t", &save));)
    fprintf(out, " %s", c);
  fputc('\n', out);
  char *osave = NULL;
  for (char *o = strtok_r(opts, " ", &osave); o; o = strtok_r(NULL, " ", &osave)) {
    if (!strncmp(o, "signed-by=", 10))
      fprintf(out, "Signed-By: %s\n", o + 10);
    else if (!strncmp(o, "arch=", 5))
      fprintf(out, "Architectures: %s\n", o + 5);
    else if (!strncmp(o, "trusted=", 8))
      fprintf(out, "Trusted: %s\n", o + 8);
  }
  fputc('\n', out);
  (*found)++;
}

static char *read_small(const char *path)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_SOURCES_FILE)
    return NULL;
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf || sbx_read_all(fd, buf, (size_t)st.st_size) != st.st_size) {
    free(buf);
    return NULL;
  }
  buf[st.st_size] = '\0';
  return buf;
}

static void sources_file(const char *path, bool deb822, const char *suite, FILE *out,
                         unsigned *found)
{
  _cleanup_free_ char *text = read_small(path);
  if (!text)
    return;
  if (deb822) {
    deb822_file(text, suite, out, found);
    return;
  }
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    oneline_entry(l, suite, out, found);
}

static bool ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && !strcmp(s + n - m, suffix);
}

static int dirent_filter(const struct dirent *d)
{
  return d->d_name[0] != '.' &&
         (ends_with(d->d_name, ".list") || ends_with(d->d_name, ".sources"));
}

/* Writes the host's entries for suite (deb822) to path. */
static int host_sources(const char *suite, const char *path, unsigned *found,
                        struct sbx_error *err)
{
  _cleanup_fclose_ FILE *out = fopen(path, "we");
  if (!out)
    return sbx_err_sys(err, errno, "create %s", path);
  *found = 0;
  sources_file("/etc/apt/sources.list", false, suite, out, found);
  struct dirent **ents = NULL;
  int n = scandir("/etc/apt/sources.list.d", &ents, dirent_filter, alphasort);
  for (int i = 0; i < n; i++) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "/etc/apt/sources.list.d/%s", ents[i]->d_name);
    if (i < MAX_SOURCE_FILES)
      sources_file(p, ends_with(p, ".sources"), suite, out, found);
    free(ents[i]);
  }
  free(ents);
  if (fflush(out) != 0)
    return sbx_err_sys(err, errno, "write %s", path);
  if (!*found)
    return sbx_err_field(
        err, "mirror",
        "the host's apt sources (/etc/apt/sources.list, sources.list.d) have no "
        "enabled 'deb' entry for %s, %s-updates or %s-security: give --mirror URL",
        suite, suite, suite);
  return 0;
}

/* ---- running helpers ----------------------------------------------------- */

typedef void (*line_fn)(void *ud, const char *line);

/* Runs argv (absolute path), env envp, stdin /dev/null; fd `capture` (1 or
 * 2) is read line by line into cb, the other output goes to /dev/null.
 * Lines are cut at MAX_LINE.  Returns the exit status (≥ 0) or -1. */
static int run_lines(char *const argv[], char *const envp[], int capture, line_fn cb, void *ud,
                     struct sbx_error *err)
{
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0)
    return sbx_err_sys(err, errno, "pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, capture == 1 ? 2 : 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], capture);
  pid_t child;
  int rc = posix_spawn(&child, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(pfd[1]);
  if (rc != 0) {
    close(pfd[0]);
    return sbx_err_sys(err, rc, "run %s", argv[0]);
  }
  /* killed and reaped if we leave early */
  _cleanup_kill_ pid_t pid = child;
  _cleanup_fclose_ FILE *in = fdopen(pfd[0], "re");
  if (!in) {
    close(pfd[0]);
    return sbx_err_sys(err, errno, "fdopen");
  }
  char line[MAX_LINE];
  while (fgets(line, sizeof line, in)) {
    size_t n = strlen(line);
    bool whole = n && line[n - 1] == '\n';
    if (whole)
      line[--n] = '\0';
    cb(ud, line);
    if (!whole) { /* a longer line: the rest is dropped */
      int c;
      while ((c = fgetc(in)) != EOF && c != '\n')
        ;
    }
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return sbx_err_sys(err, errno, "wait %s", argv[0]);
  pid = -1;
  if (WIFSIGNALED(status))
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "%s killed by signal %d", argv[0],
                       WTERMSIG(status));
  return WEXITSTATUS(status);
}

/* The host's apt settings that decide how the archive is reached. */
static const char *const apt_keys[] = {"Acquire::Check-Valid-Until", "Acquire::Check-Date",
                                       "Acquire::http::Proxy", "Acquire::https::Proxy"};
#define NAPT (sizeof apt_keys / sizeof *apt_keys)

struct aptopts {
  char opt[NAPT][300];
};

static void apt_line(void *ud, const char *line)
{
  struct aptopts *a = ud;
  for (size_t i = 0; i < NAPT; i++) {
    size_t kl = strlen(apt_keys[i]);
    if (!strncasecmp(line, apt_keys[i], kl) && line[kl] == ' ' && line[kl + 1] == '"' &&
        !strchr(line + kl + 2, '\n'))
      snprintf(a->opt[i], sizeof a->opt[i], "%s", line);
  }
}

static void host_apt_options(struct aptopts *a)
{
  memset(a, 0, sizeof *a);
  char *argv[] = {"/usr/bin/apt-config", "dump", NULL};
  char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
  struct sbx_error e = {0};
  if (access(argv[0], X_OK) == 0 && run_lines(argv, envp, 1, apt_line, a, &e) != 0)
    sbx_warn(IMG_SUB, "apt-config dump: %s", e.msg[0] ? e.msg : "failed");
}

/* ---- mmdebstrap ------------------------------------------------------------ */

struct mm_out {
  const struct plan *p;
  char tail[TAIL_LEN];
};

static void mm_line(void *ud, const char *line)
{
  struct mm_out *m = ud;
  if (m->p->b->progress)
    m->p->b->progress(m->p->b->ud, line);
  else
    sbx_debug(IMG_SUB, "mmdebstrap: %s", line);
  size_t have = strlen(m->tail), add = strlen(line) + 1;
  if (add >= sizeof m->tail)
    return;
  if (have + add >= sizeof m->tail) {
    size_t drop = have + add - (sizeof m->tail - 1);
    memmove(m->tail, m->tail + drop, have - drop + 1);
    have -= drop;
  }
  snprintf(m->tail + have, sizeof m->tail - have, "%s%s", have ? "\n" : "", line);
}

/* The hooks run in a shell on the host with $1 = the chroot.  dpkg's
 * force-unsafe-io (no fsync per file: the tree is packed up right after)
 * is set for the build only; the customize hook removes it and the apt
 * options (a proxy is the host's business), empties the files mmdebstrap
 * copies from the host, and slims the image like Debian's -slim images:
 * docs (but copyright files), man pages, info and locales go, and a dpkg
 * exclude keeps later installs slim.  Slimming here rather than with
 * --dpkgopt path-exclude: that filters every package through a Python
 * helper during extraction, which tripled the build time.  find never
 * follows a symlink, so nothing outside $1 is touched. */
#define SETUP_HOOK                                                                              \
  "mkdir -p \"$1\"/etc/dpkg/dpkg.cfg.d && echo force-unsafe-io > "                              \
  "\"$1\"/etc/dpkg/dpkg.cfg.d/00sandboxd-build"
#define CUSTOMIZE_HOOK                                                                                \
  "set -e; r=\"$1\"; "                                                                                \
  "rm -f \"$r\"/etc/dpkg/dpkg.cfg.d/00sandboxd-build \"$r\"/etc/apt/apt.conf.d/99mmdebstrap "         \
  "\"$r\"/etc/resolv.conf \"$r\"/etc/hostname; : > \"$r\"/etc/resolv.conf; : > \"$r\"/etc/hostname; " \
  "for d in man info locale; do if [ -d \"$r\"/usr/share/$d ]; then "                                 \
  "find \"$r\"/usr/share/$d -mindepth 1 -delete; fi; done; "                                          \
  "if [ -d \"$r\"/usr/share/doc ]; then "                                                             \
  "find \"$r\"/usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete; "                       \
  "find \"$r\"/usr/share/doc -mindepth 1 -type d -empty -delete; fi; "                                \
  "printf '%s\\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' "         \
  "'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*' "                                 \
  "'path-exclude=/usr/share/locale/*' > \"$r\"/etc/dpkg/dpkg.cfg.d/90sandboxd-slim"

static int run_mmdebstrap(const struct plan *p, const char *work, const char *tar,
                          struct sbx_error *err)
{
  char sources[PATH_MAX], include[sizeof p->pkglist + 16], variant[32], mode[32];
  char epoch[48], tmpdir[PATH_MAX + 8];
  const char *mirror = p->b->mirror;
  if (!mirror) {
    unsigned found;
    snprintf(sources, sizeof sources, "%s/sources", work);
    if (host_sources(p->suite, sources, &found, err) < 0)
      return -1;
    note(p, "apt sources: %u entr%s of the host's for %s", found, found == 1 ? "y" : "ies",
         p->suite);
    mirror = sources;
  }
  struct aptopts apt;
  host_apt_options(&apt);
  snprintf(include, sizeof include, "--include=%s", p->pkglist);
  snprintf(variant, sizeof variant, "--variant=%s", p->variant);
  snprintf(mode, sizeof mode, "--mode=%s", geteuid() == 0 ? "root" : "unshare");
  char *argv[48];
  size_t n = 0;
  argv[n++] = "/usr/bin/mmdebstrap";
  argv[n++] = mode;
  argv[n++] = variant;
  argv[n++] = "--format=tar";
  argv[n++] = include;
  argv[n++] = "--setup-hook=" SETUP_HOOK;
  argv[n++] = "--customize-hook=" CUSTOMIZE_HOOK;
  char aptarg[NAPT][320];
  for (size_t i = 0; i < NAPT; i++)
    if (apt.opt[i][0]) {
      snprintf(aptarg[i], sizeof aptarg[i], "--aptopt=%s", apt.opt[i]);
      argv[n++] = aptarg[i];
    }
  argv[n++] = "--";
  argv[n++] = (char *)p->suite;
  argv[n++] = (char *)tar;
  argv[n++] = (char *)mirror;
  argv[n] = NULL;
  snprintf(epoch, sizeof epoch, "SOURCE_DATE_EPOCH=%lld", (long long)p->epoch);
  snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", work);
  /* a fixed PATH: mmdebstrap runs python helpers (mmtarfilter) and must get
   * the system's python, not a user's shim */
  char *envp[] = {
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "HOME=/root", epoch, tmpdir, NULL};
  if (access(argv[0], X_OK) < 0)
    return sbx_err_set(err, SBX_E_RUNTIME_UNAVAILABLE, errno,
                       "image build needs mmdebstrap (Debian package mmdebstrap): %s",
                       strerror(errno));
  note(p, "mmdebstrap %s (variant %s, packages %s, SOURCE_DATE_EPOCH=%lld)", p->suite,
       p->variant, p->pkglist, (long long)p->epoch);
  struct mm_out out = {.p = p};
  int rc = run_lines(argv, envp, 2, mm_line, &out, err);
  if (rc < 0)
    return -1;
  if (rc != 0)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "mmdebstrap failed (exit %d):\n%s", rc, out.tail);
  return 0;
}

/* ---- the OCI layout --------------------------------------------------------- */

/* Gzips the tar into <layout>/blobs/sha256/<digest>; diff_id is the
 * digest of the uncompressed tar. */
static int write_layer(const char *tar, const char *layout, char *digest, char *diff_id,
                       int64_t *size, struct sbx_error *err)
{
  char tmp[PATH_MAX], dst[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/blobs/layer.tmp", layout);
  _cleanup_close_ int in = open(tar, O_RDONLY | O_CLOEXEC);
  _cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (in < 0 || out < 0)
    return sbx_err_sys(err, errno, "layer %s", in < 0 ? tar : tmp);
  z_stream z = {0};
  /* 15 + 16: a gzip wrapper with mtime 0 and no name, so the bytes depend
   * on the tar alone */
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return sbx_err_set(err, SBX_E_INTERNAL, 0, "zlib init");
  struct img_hash raw, gz;
  img_hash_init(&raw);
  img_hash_init(&gz);
  enum { BUF = 1 << 17 };
  _cleanup_free_ unsigned char *ibuf = malloc(BUF), *obuf = malloc(BUF);
  if (!ibuf || !obuf) {
    deflateEnd(&z);
    return sbx_err_sys(err, ENOMEM, "layer");
  }
  int64_t total = 0;
  int rc = 0, flush = Z_NO_FLUSH;
  while (rc == 0 && flush != Z_FINISH) {
    ssize_t r = read(in, ibuf, BUF);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = sbx_err_sys(err, errno, "read %s", tar);
      break;
    }
    img_hash_update(&raw, ibuf, (size_t)r);
    flush = r == 0 ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = ibuf;
    z.avail_in = (uInt)r;
    do {
      z.next_out = obuf;
      z.avail_out = BUF;
      deflate(&z, flush);
      size_t have = BUF - z.avail_out;
      if (have && sbx_write_all(out, obuf, have) < 0) {
        rc = sbx_err_sys(err, errno, "write %s", tmp);
        break;
      }
      img_hash_update(&gz, obuf, have);
      total += (int64_t)have;
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  if (rc < 0)
    return -1;
  img_hash_final(&raw, diff_id);
  img_hash_final(&gz, digest);
  *size = total;
  snprintf(dst, sizeof dst, "%s/blobs/sha256/%s", layout, digest + 7);
  if (rename(tmp, dst) < 0)
    return sbx_err_sys(err, errno, "rename %s", dst);
  return 0;
}

/* Writes a JSON document as a blob of the layout; digest and size out. */
static int write_blob_json(const char *layout, json_t *doc, char *digest, int64_t *size,
                           struct sbx_error *err)
{
  _cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text)
    return sbx_err_sys(err, ENOMEM, "json");
  size_t len = strlen(text);
  img_digest_buf(text, len, digest);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/blobs/sha256/%s", layout, digest + 7);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || sbx_write_all(fd, text, len) < 0)
    return sbx_err_sys(err, errno, "write %s", path);
  if (size)
    *size = (int64_t)len;
  return 0;
}

static int write_file_json(const char *layout, const char *name, json_t *doc,
                           struct sbx_error *err)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", layout, name);
  if (json_dump_file(doc, path, JSON_COMPACT | JSON_SORT_KEYS) < 0)
    return sbx_err_sys(err, errno ? errno : EIO, "write %s", path);
  return 0;
}

/* The image's Cmd: the language the packages bring, else a shell. */
static json_t *default_cmd(const struct plan *p)
{
  if (plan_has(p, "python3"))
    return json_pack("[s]", "python3");
  if (plan_has(p, "nodejs"))
    return json_pack("[s]", "node");
  return json_pack("[s]", "/bin/sh");
}

static json_t *config_doc(const struct plan *p, const char *diff_id)
{
  char created[40], by[sizeof p->pkglist + 200];
  sbx_format_time(p->epoch, created, sizeof created);
  snprintf(by, sizeof by, "sandboxd image build --from debian:%s --packages %s --variant %s",
           p->suite, p->pkglist, p->variant);
  return json_pack(
      "{s:s,s:s,s:s,s:{s:[s,s],s:o,s:{s:s,s:s,s:s,s:s}},s:{s:s,s:[s]},s:[{s:s,s:s}]}", "created",
      created, "architecture", p->arch, "os", "linux", "config", "Env", "PATH=" IMAGE_PATH,
      "LANG=C.UTF-8", "Cmd", default_cmd(p), "Labels", "io.sandboxd.build.from", p->b->from,
      "io.sandboxd.build.packages", p->pkglist, "io.sandboxd.build.variant", p->variant,
      "org.opencontainers.image.created", created, "rootfs", "type", "layers", "diff_ids",
      diff_id, "history", "created", created, "created_by", by);
}

static int write_layout(const struct plan *p, const char *tar, const char *layout,
                        char *manifest_digest, struct sbx_error *err)
{
  char blobs[PATH_MAX];
  snprintf(blobs, sizeof blobs, "%s/blobs/sha256", layout);
  if (sbx_mkdir_p(blobs, 0755) < 0)
    return sbx_err_sys(err, errno, "mkdir %s", blobs);
  char layer[IMG_DIGEST_LEN], diff_id[IMG_DIGEST_LEN], config[IMG_DIGEST_LEN];
  int64_t layer_size = 0, config_size = 0, manifest_size = 0;
  uint64_t t0 = sbx_now_ms();
  if (write_layer(tar, layout, layer, diff_id, &layer_size, err) < 0)
    return -1;
  note(p, "layer %.19s: %.1f MB gzipped in %.1f s", layer, layer_size / 1e6,
       (sbx_now_ms() - t0) / 1e3);
  json_t *cfg = config_doc(p, diff_id);
  json_t *man = NULL, *idx = NULL, *oci = NULL;
  int rc = -1;
  if (!cfg || write_blob_json(layout, cfg, config, &config_size, err) < 0)
    goto out;
  man = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:[{s:s,s:s,s:I}]}", "schemaVersion", 2, "mediaType",
                  MEDIA_MANIFEST, "config", "mediaType", MEDIA_CONFIG, "digest", config, "size",
                  (json_int_t)config_size, "layers", "mediaType", MEDIA_LAYER, "digest", layer,
                  "size", (json_int_t)layer_size);
  if (!man || write_blob_json(layout, man, manifest_digest, &manifest_size, err) < 0)
    goto out;
  /* both name annotations: import (and containerd) read io.containerd.image.name */
  idx = json_pack("{s:i,s:[{s:s,s:s,s:I,s:{s:s,s:s},s:{s:s,s:s}}]}", "schemaVersion", 2,
                  "manifests", "mediaType", MEDIA_MANIFEST, "digest", manifest_digest, "size",
                  (json_int_t)manifest_size, "platform", "os", "linux", "architecture", p->arch,
                  "annotations", "io.containerd.image.name", p->ref.canonical,
                  "org.opencontainers.image.ref.name", p->ref.canonical);
  oci = json_pack("{s:s}", "imageLayoutVersion", "1.0.0");
  if (!idx || !oci || write_file_json(layout, "index.json", idx, err) < 0 ||
      write_file_json(layout, "oci-layout", oci, err) < 0)
    goto out;
  rc = 0;
out:
  if (rc < 0 && !err->msg[0])
    sbx_err_sys(err, ENOMEM, "image layout");
  json_decref(cfg);
  json_decref(man);
  json_decref(idx);
  json_decref(oci);
  return rc;
}

/* --output DIR: absent (created) or an empty directory. */
static int prepare_output(const char *dir, struct sbx_error *err)
{
  if (mkdir(dir, 0755) == 0)
    return 0;
  if (errno != EEXIST)
    return sbx_err_sys(err, errno, "mkdir %s", dir);
  DIR *d = opendir(dir);
  if (!d)
    return sbx_err_sys(err, errno, "open %s", dir);
  struct dirent *e;
  bool empty = true;
  while (empty && (e = readdir(d)))
    empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
  closedir(d);
  if (!empty)
    return sbx_err_field(err, "output", "--output %s exists and is not empty", dir);
  return 0;
}

static int build_in(const struct plan *p, const char *work, char *canonical, char *digest,
                    struct sbx_error *err)
{
  char tar[PATH_MAX], layout[PATH_MAX];
  snprintf(tar, sizeof tar, "%s/rootfs.tar", work);
  if (p->b->output) {
    if (prepare_output(p->b->output, err) < 0)
      return -1;
    snprintf(layout, sizeof layout, "%s", p->b->output);
  } else {
    snprintf(layout, sizeof layout, "%s/oci", work);
  }
  uint64_t t0 = sbx_now_ms();
  if (run_mmdebstrap(p, work, tar, err) < 0)
    return -1;
  struct stat st;
  if (stat(tar, &st) < 0)
    return sbx_err_sys(err, errno, "mmdebstrap wrote no %s", tar);
  note(p, "rootfs: %.1f MB tar in %.1f s", st.st_size / 1e6, (sbx_now_ms() - t0) / 1e3);
  char man[IMG_DIGEST_LEN];
  if (write_layout(p, tar, layout, man, err) < 0)
    return -1;
  unlink(tar);
  uint64_t t1 = sbx_now_ms();
  if (sbx_image_import(layout, p->ref.canonical, canonical, err) < 0)
    return -1;
  note(p, "stored %s %s (import and unpack %.1f s; total %.1f s)", canonical, man,
       (sbx_now_ms() - t1) / 1e3, (sbx_now_ms() - t0) / 1e3);
  snprintf(digest, IMG_DIGEST_LEN, "%s", man);
  return 0;
}

int sbx_image_build(const struct sbx_image_build *b, char *canonical, char *digest,
                    struct sbx_error *err)
{
  char canon[700] = "", dig[IMG_DIGEST_LEN] = "";
  struct plan p;
  if (plan_new(b, &p, err) < 0) {
    plan_free(&p);
    return -1;
  }
  if (img_store_ready(err) < 0) {
    plan_free(&p);
    return -1;
  }
  /* shared gc.lock for the whole build: the work dir lives in tmp/, which a
   * GC would otherwise clean from under a build longer than ten minutes */
  _cleanup_close_ int lk = img_lock("gc.lock", LOCK_SH, err);
  if (lk < 0) {
    plan_free(&p);
    return -1;
  }
  char work[PATH_MAX];
  img_tmp_path("build", work, sizeof work);
  int rc;
  if (mkdir(work, 0700) < 0)
    rc = sbx_err_sys(err, errno, "mkdir %s", work);
  else
    rc = build_in(&p, work, canon, dig, err);
  /* FTW_MOUNT: a mount mmdebstrap left behind (killed mid-run) is never
   * entered */
  sbx_rm_rf(work);
  plan_free(&p);
  if (rc < 0)
    return -1;
  if (canonical)
    snprintf(canonical, sizeof canon, "%s", canon);
  if (digest)
    snprintf(digest, IMG_DIGEST_LEN, "%s", dig);
  return 0;
}
