// AuditVerdict.java — the API's AuditVerdict schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The audit chain's verification. */
public record AuditVerdict(
        boolean ok,
        long events,
        @JsonProperty("last_seq") long lastSeq,
        @JsonProperty("head_hash") String headHash,
        @JsonProperty("first_broken_seq") Long firstBrokenSeq,
        String problem) {
}
