// Audit.java — client.audit(): the tamper-evident audit chain (admin keys).
package dev.sandboxd;

import dev.sandboxd.model.AuditEvent;
import dev.sandboxd.model.AuditPage;
import dev.sandboxd.model.AuditVerdict;
import java.time.Duration;

/** Audit events (oldest first) and the chain's verification. */
public final class Audit {
    private final Transport t;

    Audit(Transport t) {
        this.t = t;
    }

    public AuditPage list(Integer limit) {
        return list(null, null, null, limit);
    }

    /** A page of events; any argument may be null (tenant: admin keys only; after: a next_cursor). */
    public AuditPage list(Long tenant, String action, Long after, Integer limit) {
        return t.json(new Transport.Call("listAuditEvents").query("tenant", tenant).query("action", action)
            .query("after", after).query("limit", limit), AuditPage.class);
    }

    /** Every event (tenant, action null: any), pages fetched as needed. */
    public Iterable<AuditEvent> iterate(Long tenant, String action) {
        return Paging.all(cursor -> {
            AuditPage p = list(tenant, action, cursor == null ? null : Long.valueOf(cursor), 1000);
            return new Paging.Page<>(p.events(), p.nextCursor() == null ? null : p.nextCursor().toString());
        });
    }

    /** Re-hashes the whole chain. */
    public AuditVerdict verify() {
        return t.json(new Transport.Call("verifyAudit").timeout(Sessions.max(t.cfg.timeout, Duration.ofMinutes(5))),
            AuditVerdict.class);
    }
}
