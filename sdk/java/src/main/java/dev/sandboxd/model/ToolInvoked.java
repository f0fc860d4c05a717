// ToolInvoked.java — the API's ToolInvoked schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** The execution an invoke queued (poll it by id, or use Tools.run). */
public record ToolInvoked(
        String id,
        String status,
        String profile,
        String tool,
        int generation) {
}
