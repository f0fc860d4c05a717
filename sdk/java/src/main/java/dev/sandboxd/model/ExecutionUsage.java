// ExecutionUsage.java — the API's ExecutionUsage schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** Resources one execution used. */
public record ExecutionUsage(
        @JsonProperty("cpu_seconds") double cpuSeconds,
        @JsonProperty("memory_mb_seconds") double memoryMbSeconds,
        @JsonProperty("duration_seconds") double durationSeconds,
        @JsonProperty("memory_peak_bytes") long memoryPeakBytes) {
}
