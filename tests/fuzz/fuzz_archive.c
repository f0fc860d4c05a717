/* fuzz_archive.c — PUT …/archive's check of a tenant's tar before a byte
 * is written (core/archive_extract.c sbx_archive_validate, through
 * libarchive): absolute names, "..", devices, hard links, symlinks leaving
 * the directory or traversed by later entries, names too long, counts.
 * Input: the request body (a tar, possibly compressed). */
#include <stdlib.h>

#include "core/internal.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* The route's limits, and low ones so the 413 paths run too. */
  static const struct sbx_archive_limits lims[] = {
      {SBX_ARCHIVE_MAX_ENTRIES, SBX_ARCHIVE_MAX_BYTES},
      {3, 1024},
  };
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    struct sbx_error err = {0};
    if (sbx_archive_validate(data, size, &lims[i], &err) < 0 && err.code == SBX_E_NONE)
      abort(); /* a refusal always says why */
  }
  return 0;
}
