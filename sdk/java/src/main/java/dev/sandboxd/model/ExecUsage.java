// ExecUsage.java — the API's ExecUsage schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** Resources one exec used. */
public record ExecUsage(
        @JsonProperty("cpu_seconds") double cpuSeconds,
        @JsonProperty("memory_peak_bytes") long memoryPeakBytes,
        @JsonProperty("oom_kills") long oomKills) {
}
