// ProcessOutput.java — the API's ProcessOutput schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** The kept output of a background process, from the offsets asked. */
public record ProcessOutput(
        String stdout,
        @JsonProperty("stdout_encoding") String stdoutEncoding,
        @JsonProperty("stdout_offset") long stdoutOffset,
        @JsonProperty("stdout_next_offset") long stdoutNextOffset,
        @JsonProperty("stdout_dropped_bytes") long stdoutDroppedBytes,
        @JsonProperty("stdout_skipped") boolean stdoutSkipped,
        @JsonProperty("stdout_gap_at") Long stdoutGapAt,
        String stderr,
        @JsonProperty("stderr_encoding") String stderrEncoding,
        @JsonProperty("stderr_offset") long stderrOffset,
        @JsonProperty("stderr_next_offset") long stderrNextOffset,
        @JsonProperty("stderr_dropped_bytes") long stderrDroppedBytes,
        @JsonProperty("stderr_skipped") boolean stderrSkipped,
        @JsonProperty("stderr_gap_at") Long stderrGapAt,
        String status,
        ExecResult result) implements CapturedOutput {
}
