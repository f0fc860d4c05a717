// ToolApplied.java — one item of the API's ManifestApplyResult.results (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** What applying one document did: action "created", "updated" or "unchanged". */
public record ToolApplied(
        String name,
        String action,
        Tool tool) {
}
