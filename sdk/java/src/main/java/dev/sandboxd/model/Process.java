// Process.java — the API's Process schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/** A background process of a session. */
public record Process(
        int pid,
        List<String> command,
        String status,
        @JsonProperty("exit_code") Integer exitCode,
        Integer signal,
        @JsonProperty("started_at") String startedAt,
        @JsonProperty("finished_at") String finishedAt,
        JsonNode pty,
        @JsonProperty("result_status") String resultStatus,
        String reason,
        ExecUsage usage,
        @JsonProperty("stdout_bytes") Long stdoutBytes,
        @JsonProperty("stderr_bytes") Long stderrBytes) {
}
