// ContextRunResult.java — the API's ContextRunResult schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** The result of running code in a context. */
public record ContextRunResult(
        String status,
        String reason,
        String stdout,
        @JsonProperty("stdout_encoding") String stdoutEncoding,
        String stderr,
        @JsonProperty("stderr_encoding") String stderrEncoding,
        @JsonProperty("stdout_truncated") boolean stdoutTruncated,
        @JsonProperty("stderr_truncated") boolean stderrTruncated,
        String result,
        List<ContextOutput> outputs,
        ContextError error,
        @JsonProperty("duration_ms") long durationMs,
        @JsonProperty("execution_count") long executionCount) implements CapturedOutput {
}
