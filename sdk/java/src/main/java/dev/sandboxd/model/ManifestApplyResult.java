// ManifestApplyResult.java — the API's ManifestApplyResult schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** What an apply did: one result per document, in the order given. */
public record ManifestApplyResult(
        @JsonProperty("dry_run") boolean dryRun,
        List<ToolApplied> results) {
}
