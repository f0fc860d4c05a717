// UsageGroup.java — the API's UsageGroup schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The usage of one group. */
public record UsageGroup(
        String key,
        long records,
        @JsonProperty("cpu_seconds") double cpuSeconds,
        @JsonProperty("memory_mb_seconds") double memoryMbSeconds,
        @JsonProperty("duration_seconds") double durationSeconds) {
}
