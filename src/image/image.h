/* image.h — OCI images: references, the registry client, the
 * content-addressed layer store under <state_dir>/images, import, GC.
 *
 * The run-time contract (what drivers and the core use) is the part below
 * marked "run time"; the rest serves the `sandboxd image` commands and the
 * /v1/sandbox/images endpoints.  Thread-safe; the store is also safe
 * against another process (e.g. `sandboxd image pull` beside a daemon)
 * through atomic renames and a lock file.
 *
 * Layout (store.c):
 *   images/blobs/sha256/<hex>        verified blobs (manifests, configs, layer tars)
 *   images/layers/sha256/<hex>/      one unpacked layer, keyed by its (verified)
 *                                    blob digest, whiteouts in overlayfs form
 *   images/refs.json                 canonical ref → manifest digest, config, layers
 *   images/tmp/                      downloads in progress (resumable), unpacks
 *   images/refs.lock, images/gc.lock flock()s: refs.json writers; pull/import (shared)
 *                                    against GC (exclusive)
 * An image in use holds a shared flock on each of its layer directories, so
 * a GC in any process skips them (docs/images.md). */
#ifndef SBX_IMAGE_IMAGE_H
#define SBX_IMAGE_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- references (ref.c) ------------------------------------------------ */

struct sbx_image_ref {
  char registry[256];   /* "registry-1.docker.io" for docker.io, "127.0.0.1:5000", … */
  char repository[256]; /* "library/python" */
  char tag[128];        /* "3.12-slim"; "" when only a digest was given */
  char digest[80];      /* "sha256:<64 hex>" or "" */
  char canonical[700];  /* "docker.io/library/python:3.12-slim" (Docker's normal form) */
  bool plain_http;      /* registry on 127.0.0.0/8, ::1 or localhost (Docker's rule) */
};

/* "host" is not a reference: callers check for it first.  Errors are
 * 400 invalid_request naming `field`. */
int sbx_image_ref_parse(const char *text, const char *field, struct sbx_image_ref *out,
                        struct sbx_error *err);

/* ---- run time ------------------------------------------------------------ */

enum sbx_image_pull { SBX_IMAGE_PULL_MISSING = 0, SBX_IMAGE_PULL_NEVER = 1 };

/* An image ready to run: its layers unpacked and its config read.  Held
 * (refcounted) by every sandbox built from it; the GC never removes a layer
 * of a held image. */
struct sbx_image {
  char ref[700];   /* canonical reference */
  char digest[80]; /* manifest digest */
  size_t nlayers;
  char **layers; /* absolute layer dirs, lowest first */
  /* the image config ("config" object of the OCI config blob) */
  char **env;        /* NULL-terminated "KEY=VALUE" */
  char *workdir;     /* NULL when unset */
  char *user;        /* NULL when unset: "1000", "1000:1000", "root", "name" */
  char **entrypoint; /* NULL-terminated or NULL */
  char **cmd;        /* NULL-terminated or NULL */
};

/* Opens (creates) the store under state_dir.  Once per process. */
int sbx_image_store_open(const char *state_dir, struct sbx_error *err);
/* Resolves a reference to a held image, pulling it when missing and
 * policy allows.  404 not_found (with the ref) when missing and never;
 * 502/503 with the registry's reason when a pull fails; digest mismatches
 * are errors, never accepted. */
int sbx_image_get(const char *ref, enum sbx_image_pull policy, struct sbx_image **out,
                  struct sbx_error *err);
/* Takes another hold / drops one (the last drop frees it). */
struct sbx_image *sbx_image_hold(struct sbx_image *img);
void sbx_image_release(struct sbx_image *img);

/* ---- management (CLI, /v1/sandbox/images) -------------------------------- */

/* Progress of one blob download: what is the blob's digest, total its size
 * from the manifest (0 when unknown).  Called from the pulling thread. */
typedef void (*sbx_image_progress_fn)(void *ud, const char *what, uint64_t done, uint64_t total);
/* Pulls ref (always asks the registry; blobs already stored are not
 * downloaded again) and records it.  canonical/digest (may be NULL) get the
 * canonical reference (700 bytes) and manifest digest (80 bytes). */
int sbx_image_pull(const char *ref, sbx_image_progress_fn cb, void *ud, char *canonical,
                   char *digest, struct sbx_error *err);
/* Imports an OCI layout directory, an OCI archive or a `docker save`
 * tarball (detected).  name overrides the archive's own name (required when
 * it has none).  canonical (700 bytes, may be NULL) gets the name stored. */
int sbx_image_import(const char *path, const char *name, char *canonical, struct sbx_error *err);
/* New JSON array, one object per reference:
 * {ref, digest, config, layers:[digest…], size, created}, sorted by ref. */
int sbx_image_list(json_t **out, struct sbx_error *err);
/* Forgets a reference (its layers stay until the GC). 404 if unknown. */
int sbx_image_remove(const char *ref, struct sbx_error *err);

struct sbx_image_gc_stats {
  unsigned blobs_removed;
  unsigned layers_removed;
  unsigned layers_in_use; /* unreferenced but held by a running image: kept */
  unsigned tmp_removed;
  unsigned copies_removed; /* shifted copies of removed layers (isolation/shift.c) */
  uint64_t bytes_freed;    /* of blobs */
};
/* Removes blobs and layers no reference uses, never a held layer; stale
 * temp files (a day old) too.  409 conflict while a pull/import runs. */
int sbx_image_gc(struct sbx_image_gc_stats *st, struct sbx_error *err);

/* ---- building (build.c) -------------------------------------------------- */

/* `sandboxd image build`: a single-layer image of Debian packages made with
 * mmdebstrap (docs/images.md).  All strings are borrowed. */
struct sbx_image_build {
  const char *from;     /* "debian:SUITE"; nothing else is accepted */
  const char *packages; /* "python3,nodejs": Debian package names, comma-separated */
  const char *name;     /* reference to store the image as ("lang/python-node") */
  const char *mirror;   /* NULL: the host's apt entries for SUITE (-updates, -security);
                         * else an http://, https:// or file:/// archive URL */
  const char *variant;  /* NULL or "apt" (default), "essential", "minbase" */
  const char *output;   /* NULL, or a directory (absent or empty) that keeps the OCI layout */
  void (*progress)(void *ud, const char *line); /* NULL: the log only */
  void *ud;
};
/* Builds, then imports through sbx_image_import.  Takes minutes (it
 * installs packages); holds gc.lock shared meanwhile.  canonical (700
 * bytes) and digest (80 bytes, the manifest's) may be NULL.  400 for a bad
 * request (naming from/packages/name/mirror/variant/output), 503 without
 * mmdebstrap, 500 with mmdebstrap's last lines when it fails. */
int sbx_image_build(const struct sbx_image_build *b, char *canonical, char *digest,
                    struct sbx_error *err);

/* `sandboxd image …` (cli.c): argv[0] is "image". */
int sbx_image_main(int argc, char **argv);

#endif
