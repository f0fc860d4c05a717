/* digest.c — content digests (sha256 through libsodium, which the project
 * already links).  Every blob that enters the store goes through here: a
 * digest mismatch is an error, never a warning. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "image/image_int.h"

void img_hash_init(struct img_hash *h) { crypto_hash_sha256_init(&h->st); }

void img_hash_update(struct img_hash *h, const void *buf, size_t len)
{
  crypto_hash_sha256_update(&h->st, buf, len);
}

void img_hash_final(struct img_hash *h, char *out)
{
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&h->st, d);
  memcpy(out, "sha256:", 7);
  sbx_hex(d, sizeof d, out + 7);
}

void img_digest_buf(const void *buf, size_t len, char *out)
{
  struct img_hash h;
  img_hash_init(&h);
  img_hash_update(&h, buf, len);
  img_hash_final(&h, out);
}

int img_digest_fd(int fd, char *out, uint64_t *size, struct sbx_error *err)
{
  struct img_hash h;
  img_hash_init(&h);
  char buf[1 << 16];
  uint64_t total = 0;
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sbx_err_sys(err, errno, "read");
    if (n == 0)
      break;
    img_hash_update(&h, buf, (size_t)n);
    off += n;
    total += (uint64_t)n;
  }
  img_hash_final(&h, out);
  if (size)
    *size = total;
  return 0;
}

bool img_digest_valid(const char *d)
{
  if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
    return false;
  for (const char *p = d + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

int img_digest_check(const char *what, const char *expected, const char *got,
                     struct sbx_error *err)
{
  if (!strcmp(expected, got))
    return 0;
  return sbx_err_set(err, SBX_E_BAD_GATEWAY, 0,
                     "digest mismatch for %s: expected %s, got %s (content rejected)", what,
                     expected, got);
}
