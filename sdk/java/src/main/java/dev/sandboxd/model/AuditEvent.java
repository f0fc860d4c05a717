// AuditEvent.java — the API's AuditEvent schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;

/** One event of the audit chain. */
public record AuditEvent(
        long seq,
        String time,
        @JsonProperty("time_ms") long timeMs,
        @JsonProperty("tenant_id") long tenantId,
        String actor,
        String action,
        String target,
        String outcome,
        JsonNode details,
        @JsonProperty("prev_hash") String prevHash,
        String hash) {
}
