// ExecutionCreated.java — the API's ExecutionCreated schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** The answer to creating an execution: queued. */
public record ExecutionCreated(
        String id,
        String status,
        String profile) {
}
