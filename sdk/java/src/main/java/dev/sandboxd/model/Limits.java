// Limits.java — the API's Limits schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A profile's or a sandbox's resource limits. */
public record Limits(
        String cpu,
        String memory,
        String disk,
        Integer pids,
        @JsonProperty("timeout_s") Integer timeoutS,
        @JsonProperty("output_bytes") Long outputBytes) {
}
