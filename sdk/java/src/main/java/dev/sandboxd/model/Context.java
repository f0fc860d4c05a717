// Context.java — the API's Context schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A stateful interpreter (python, node) in a session. */
public record Context(
        String id,
        String language,
        String status,
        @JsonProperty("session_id") String sessionId,
        @JsonProperty("execution_count") long executionCount,
        String version,
        String error,
        @JsonProperty("created_at") String createdAt) {
}
