/* migrations.h — the schema migrations compiled into the binary.
 *
 * The SQL lives in src/store/migrations/NNNN_name.sql, readable and shared
 * by every backend, with an optional per-backend variant
 * NNNN_name.postgres.sql (or .sqlite.sql) that backend runs instead; the
 * build turns the files into sbx_store_migrations[] (gen_migrations.py).
 * Entries are sorted by version, 1..n without gaps, so
 * sbx_store_migrations[n-1].version is the newest schema this binary
 * knows.  Each backend records applied versions in
 * schema_migrations(version, applied_at). */
#ifndef SBX_STORE_MIGRATIONS_H
#define SBX_STORE_MIGRATIONS_H

#include <stddef.h>

struct sbx_store_migration {
  int version;
  const char *name;         /* "init" for 0001_init.sql */
  const char *sql;          /* SQLite: one or more statements separated by ';' */
  const char *sql_postgres; /* PostgreSQL's text ("" when it has nothing to
                             * do for this version); the shared file unless
                             * a .postgres.sql variant exists */
};

extern const struct sbx_store_migration sbx_store_migrations[];
extern const size_t sbx_store_nmigrations;

/* The newest schema version this binary can apply (0 if none). */
static inline int sbx_store_schema_latest(void)
{
  return sbx_store_nmigrations ? sbx_store_migrations[sbx_store_nmigrations - 1].version : 0;
}

#endif
