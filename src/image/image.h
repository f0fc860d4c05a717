/* image.h — OCI images (issue 7): references, the registry client, the
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
 *   images/layers/sha256/<hex>/      one unpacked layer (by its diff id), read-only
 *   images/refs.json                 canonical ref → manifest digest
 *   images/tmp/                      downloads in progress (resumable) */
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
  char ref[700];           /* canonical reference */
  char digest[80];         /* manifest digest */
  size_t nlayers;
  char **layers;           /* absolute layer dirs, lowest first */
  /* the image config ("config" object of the OCI config blob) */
  char **env;              /* NULL-terminated "KEY=VALUE" */
  char *workdir;           /* NULL when unset */
  char *user;              /* NULL when unset: "1000", "1000:1000", "root", "name" */
  char **entrypoint;       /* NULL-terminated or NULL */
  char **cmd;              /* NULL-terminated or NULL */
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

#endif
