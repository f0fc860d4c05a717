// ExecResult.java — the API's ExecResult schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The result of an exec in a session (a non-zero exit or a timeout is a result). */
public record ExecResult(
        String status,
        String reason,
        @JsonProperty("exit_code") Integer exitCode,
        Integer signal,
        String stdout,
        @JsonProperty("stdout_encoding") String stdoutEncoding,
        String stderr,
        @JsonProperty("stderr_encoding") String stderrEncoding,
        @JsonProperty("stdout_truncated") boolean stdoutTruncated,
        @JsonProperty("stderr_truncated") boolean stderrTruncated,
        @JsonProperty("stdout_dropped_bytes") long stdoutDroppedBytes,
        @JsonProperty("stderr_dropped_bytes") long stderrDroppedBytes,
        @JsonProperty("duration_ms") long durationMs,
        ExecUsage usage,
        ResultError error) implements CapturedOutput {
}
