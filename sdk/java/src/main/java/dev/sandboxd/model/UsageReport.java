// UsageReport.java — the API's UsageReport schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A usage report (GET /v1/sandbox/usage). */
public record UsageReport(
        @JsonProperty("group_by") String groupBy,
        String from,
        String to,
        List<UsageGroup> groups,
        UsageTotal total) {
}
