/* pg.h — what the PostgreSQL backend offers beyond the storage seam: the
 * one-time (and every-upgrade) database setup run as the schema owner.
 * The backend itself is sbx_store_postgres (store/store.h), chosen by
 * sbx_store_open() for postgres:// and postgresql:// URLs. */
#ifndef SBX_STORE_PG_H
#define SBX_STORE_PG_H

#include "common/err.h"

/* Connects with owner_url (the role that owns the schema), applies the
 * pending migrations under an advisory lock (so concurrent runs are safe),
 * then grants the role named in app_url what the daemon needs: USAGE on
 * the schema, SELECT/INSERT/UPDATE on the tables (SELECT only on
 * schema_migrations, no UPDATE on audit_events, never DELETE), EXECUTE on
 * the sbx_* functions.  Idempotent.  Refuses app_url naming the owner.
 * Neither URL appears in err. */
int sbx_store_pg_init(const char *app_url, const char *owner_url, struct sbx_error *err);

#endif
