// AuditPage.java — the API's AuditPage schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A page of audit events, oldest first. */
public record AuditPage(
        List<AuditEvent> events,
        @JsonProperty("next_cursor") Long nextCursor) {
}
