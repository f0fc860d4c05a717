/* keys.c — API keys.  A key is "sbx_<key_id>_<secret>": the key id is
 * public and indexes the row; only SHA-256(secret) is stored, and the
 * comparison is constant-time (libsodium), so neither a database leak nor a
 * timing probe yields a usable key.
 *
 * Verified keys are remembered for KEY_CACHE_TTL_MS (keyed by store handle
 * and key id, holding the hash and the principal, never the secret), so a
 * burst of requests reads the key row once: a store transaction fewer per
 * request.  An entry is never refreshed by a hit, so a key row removed from
 * the store by another process (there is no revoke verb yet: SQL by hand,
 * or another node on PostgreSQL) stops authenticating on this daemon within
 * KEY_CACHE_TTL_MS.  A wrong secret for a cached id goes to the store like
 * an unknown one, so timing tells an attacker without the secret nothing
 * new. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/internal.h"
#include "obs/audit.h"

#define SECRET_BYTES 24

int sbx_keys_create(struct sbx_store_handle *st, const char *tenant, bool admin, char **key_out,
                    struct sbx_error *err)
{
  if (!tenant || !*tenant || strlen(tenant) > 100)
    return sbx_err_set(err, SBX_E_INVALID, 0,
                       "a tenant name of 1 to 100 characters is required");
  for (const char *p = tenant; *p; p++)
    if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
          (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return sbx_err_set(err, SBX_E_INVALID, 0,
                         "tenant names use letters, digits, '-', '_' and '.'");
  struct sbx_key_row row = {0};
  if (st->ops->tenant_ensure(st->st, tenant, &row.tenant_id, err) < 0)
    return -1;
  unsigned char idraw[8], secret[SECRET_BYTES];
  char idhex[17], sechex[2 * SECRET_BYTES + 1];
  randombytes_buf(idraw, sizeof idraw);
  randombytes_buf(secret, sizeof secret);
  sbx_hex(idraw, sizeof idraw, idhex);
  sbx_hex(secret, sizeof secret, sechex);
  snprintf(row.key_id, sizeof row.key_id, "k%s", idhex);
  crypto_hash_sha256(row.hash, (unsigned char *)sechex, strlen(sechex));
  row.admin = admin;
  row.created_at = sbx_wall_s();
  if (st->ops->key_insert(st->st, &row, err) < 0)
    return -1;
  sbx_audit_record(st, row.tenant_id, "cli", "auth.key.create", row.key_id, "ok",
                   json_pack("{s:s, s:b}", "tenant", tenant, "admin", admin));
  if (asprintf(key_out, "sbx_%s_%s", row.key_id, sechex) < 0)
    return sbx_err_sys(err, ENOMEM, "key");
  sodium_memzero(secret, sizeof secret);
  sodium_memzero(sechex, sizeof sechex);
  return 0;
}

static int unauthenticated(struct sbx_error *err)
{
  sbx_err_set(err, SBX_E_UNAUTHENTICATED, 0,
              "a valid API key is required "
              "(Authorization: Bearer sbx_…)");
  return sbx_err_fr(err, "Une clé d'API valide est requise (Authorization: Bearer sbx_…)");
}

static void principal_of(const struct sbx_key_row *row, struct sbx_principal *who)
{
  who->tenant_id = row->tenant_id;
  snprintf(who->tenant, sizeof who->tenant, "%s", row->tenant_name);
  snprintf(who->key_id, sizeof who->key_id, "%s", row->key_id);
  who->admin = row->admin;
}

#define KEY_CACHE_TTL_MS 2000
#define KEY_CACHE_SLOTS 64

static struct key_cache_entry {
  const struct sbx_store_handle *st; /* NULL: free */
  unsigned char hash[32];
  struct sbx_principal who;
  uint64_t expires_ms;
} key_cache[KEY_CACHE_SLOTS];
static pthread_mutex_t key_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct key_cache_entry *cache_slot(const struct sbx_store_handle *st, const char *key_id)
{
  size_t h = (size_t)(uintptr_t)st;
  for (const char *p = key_id; *p; p++)
    h = h * 31 + (unsigned char)*p;
  return &key_cache[h % KEY_CACHE_SLOTS];
}

static bool cache_get(const struct sbx_store_handle *st, const char *key_id,
                      const unsigned char want[32], struct sbx_principal *who)
{
  pthread_mutex_lock(&key_cache_lock);
  struct key_cache_entry *e = cache_slot(st, key_id);
  bool hit = e->st == st && !strcmp(e->who.key_id, key_id) && sbx_now_ms() < e->expires_ms &&
             sodium_memcmp(want, e->hash, sizeof e->hash) == 0;
  if (hit)
    *who = e->who;
  pthread_mutex_unlock(&key_cache_lock);
  return hit;
}

static void cache_put(const struct sbx_store_handle *st, const unsigned char hash[32],
                      const struct sbx_principal *who)
{
  pthread_mutex_lock(&key_cache_lock);
  struct key_cache_entry *e = cache_slot(st, who->key_id);
  e->st = st;
  memcpy(e->hash, hash, sizeof e->hash);
  e->who = *who;
  e->expires_ms = sbx_now_ms() + KEY_CACHE_TTL_MS;
  pthread_mutex_unlock(&key_cache_lock);
}

int sbx_keys_verify(struct sbx_store_handle *st, const char *token, struct sbx_principal *who,
                    struct sbx_error *err)
{
  /* sbx_k<16 hex>_<48 hex> */
  char key_id[40];
  const char *sec;
  if (!token || strncmp(token, "sbx_k", 5) != 0 || strlen(token) != 4 + 17 + 1 + 48 ||
      token[4 + 17] != '_')
    return unauthenticated(err);
  snprintf(key_id, sizeof key_id, "%.17s", token + 4);
  sec = token + 4 + 17 + 1;
  unsigned char want[32];
  crypto_hash_sha256(want, (const unsigned char *)sec, strlen(sec));
  if (cache_get(st, key_id, want, who))
    return 0;
  struct sbx_key_row row = {0};
  struct sbx_error lookup = {0};
  int found = st->ops->key_get(st->st, key_id, &row, &lookup) == 0;
  if (!found && lookup.code != SBX_E_NOT_FOUND) {
    *err = lookup;
    return -1;
  }
  /* Compare even when the id is unknown, so timing says nothing. */
  int same = sodium_memcmp(want, row.hash, sizeof want) == 0;
  if (!found || !same)
    return unauthenticated(err);
  principal_of(&row, who);
  cache_put(st, row.hash, who);
  return 0;
}

int sbx_core_keys_verify(struct sbx_core *core, const char *token, struct sbx_principal *who,
                         struct sbx_error *err)
{
  return sbx_keys_verify(sbx_core_store(core), token, who, err);
}

int sbx_core_key_principal(struct sbx_core *core, const char *key_id, struct sbx_principal *who,
                           struct sbx_error *err)
{
  struct sbx_store_handle *st = sbx_core_store(core);
  struct sbx_key_row row = {0};
  if (st->ops->key_get(st->st, key_id, &row, err) < 0)
    return -1;
  principal_of(&row, who);
  return 0;
}
