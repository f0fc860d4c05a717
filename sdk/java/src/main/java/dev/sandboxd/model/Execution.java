// Execution.java — the API's Execution schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** A one-shot execution; stdout/stderr are absent in list items. */
public record Execution(
        String id,
        String status,
        String reason,
        String profile,
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
        List<FileInfo> files,
        ExecutionUsage usage,
        @JsonProperty("created_at") String createdAt,
        @JsonProperty("started_at") String startedAt,
        @JsonProperty("finished_at") String finishedAt,
        ResultError error,
        Map<String, String> metadata) implements CapturedOutput {
    /** The statuses after which an execution never changes. */
    public static final Set<String> FINAL =
        Set.of("succeeded", "failed", "timeout", "oom_killed", "killed", "error");

    /** Whether the status is final. */
    public boolean isFinal() {
        return FINAL.contains(status);
    }
}
