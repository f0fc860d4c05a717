// UsageTotal.java — the API's UsageTotal object (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The usage of every group together. */
public record UsageTotal(
        long records,
        @JsonProperty("cpu_seconds") double cpuSeconds,
        @JsonProperty("memory_mb_seconds") double memoryMbSeconds,
        @JsonProperty("duration_seconds") double durationSeconds) {
}
