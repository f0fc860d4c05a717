/* glob.c — GLOB: expand a pattern to regular files inside the sandbox.
 *
 * Not glob(3): that would stat host paths and follow symlinks.  The
 * leading components without wildcards are resolved with openat2
 * RESOLVE_IN_ROOT (symlinks there stay inside the root); from there each
 * component is matched with fnmatch(3) against directory entries, walking
 * with openat(O_NOFOLLOW), so no symlink below the fixed prefix is followed.
 * "." and ".." components are refused; hidden names need a literal dot. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init/init.h"

#define MAX_COMPS 64

struct walk {
  int memfd;
  uint32_t max;
  uint64_t count;
  char *comps[MAX_COMPS];
  int ncomps;
};

static bool has_magic(const char *s) { return strpbrk(s, "*?[\\") != NULL; }

static int emit(struct walk *w, const char *path)
{
  size_t n = strlen(path);
  if (n > UINT16_MAX)
    return 0;
  uint16_t l = (uint16_t)n;
  if (write(w->memfd, &l, 2) != 2 || write(w->memfd, path, n) != (ssize_t)n)
    return -EIO;
  w->count++;
  return 0;
}

static int walk_at(struct walk *w, int dfd, char *path, size_t plen, int i);

/* Path component i (name in dfd) matched: descend or emit. */
static int visit(struct walk *w, int dfd, const char *name, char *path, size_t plen, int i)
{
  size_t nl = strlen(name);
  if (plen + 1 + nl >= SBX_PROTO_MAX_PATH)
    return 0;
  size_t np = plen;
  if (np == 0 || path[np - 1] != '/')
    path[np++] = '/';
  memcpy(path + np, name, nl + 1);
  np += nl;
  struct stat st;
  int r = 0;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    r = 0;
  else if (i == w->ncomps - 1) {
    if (S_ISREG(st.st_mode))
      r = emit(w, path);
  } else if (S_ISDIR(st.st_mode)) {
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) {
      r = walk_at(w, sub, path, np, i + 1);
      close(sub);
    }
  }
  path[plen] = '\0';
  return r;
}

static int walk_at(struct walk *w, int dfd, char *path, size_t plen, int i)
{
  const char *pat = w->comps[i];
  if (!has_magic(pat))
    return visit(w, dfd, pat, path, plen, i);
  int d2 = dup(dfd);
  DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
  if (!d) {
    if (d2 >= 0)
      close(d2);
    return 0;
  }
  int r = 0;
  struct dirent *e;
  while (!r && w->count <= w->max && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (fnmatch(pat, e->d_name, FNM_PERIOD) == 0)
      r = visit(w, dfd, e->d_name, path, plen, i);
  }
  closedir(d);
  return r;
}

static int split(struct walk *w, char *pat)
{
  for (char *tok, *save = NULL, *s = pat; (tok = strtok_r(s, "/", &save)); s = NULL) {
    if (!strcmp(tok, ".") || !strcmp(tok, ".."))
      return -EINVAL;
    if (w->ncomps == MAX_COMPS)
      return -ENAMETOOLONG;
    w->comps[w->ncomps++] = tok;
  }
  return w->ncomps ? 0 : -EINVAL;
}

int sbxi_glob(int rootfd, const char *pattern, uint32_t max, int memfd, uint64_t *count)
{
  struct walk w = {.memfd = memfd, .max = max};
  char pat[SBX_PROTO_MAX_PATH], path[SBX_PROTO_MAX_PATH] = "/";
  size_t n = strlen(pattern);
  if (n >= sizeof pat)
    return -ENAMETOOLONG;
  memcpy(pat, pattern, n + 1);
  int r = split(&w, pat);
  if (r)
    return r;
  /* The fixed prefix (all but the last component, up to the first
   * wildcard) is resolved in one openat2 call. */
  int first = 0;
  size_t plen = 1;
  while (first < w.ncomps - 1 && !has_magic(w.comps[first])) {
    size_t cl = strlen(w.comps[first]);
    if (plen + cl + 1 >= sizeof path)
      return -ENAMETOOLONG;
    if (plen > 1)
      path[plen++] = '/';
    memcpy(path + plen, w.comps[first], cl + 1);
    plen += cl;
    first++;
  }
  int dfd = sbxi_open_in_root(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
  if (dfd < 0)
    return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
  /* walk_at expects components from index first; shift them down. */
  memmove(w.comps, w.comps + first, (size_t)(w.ncomps - first) * sizeof w.comps[0]);
  w.ncomps -= first;
  r = walk_at(&w, dfd, path, plen, 0);
  close(dfd);
  *count = w.count;
  return r;
}
