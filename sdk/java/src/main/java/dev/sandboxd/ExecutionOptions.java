// ExecutionOptions.java — the body of POST /v1/sandbox/executions
// (ExecutionCreateRequest), fluently.
package dev.sandboxd;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.Base64;
import java.util.List;

/**
 * An execution's request: {@code new ExecutionOptions().profile("gvisor").limits(…)}.
 * Either a command (with an image, or the profile's), or a language and code.
 */
public final class ExecutionOptions extends SandboxSpec<ExecutionOptions> {
    Duration waitTimeout;

    public ExecutionOptions command(List<String> command) {
        return set("command", command);
    }

    public ExecutionOptions command(String... command) {
        return command(List.of(command));
    }

    /** "python", "node" or "bash", with {@link #code}. */
    public ExecutionOptions language(String language) {
        return set("language", language);
    }

    public ExecutionOptions code(String code) {
        return set("code", code);
    }

    /** An input file with text content. */
    public ExecutionOptions file(String path, String content) {
        body.withArray("files").addObject().put("path", path).put("content", content);
        return this;
    }

    /** An input file with bytes (sent as base64). */
    public ExecutionOptions file(String path, byte[] content) {
        ObjectNode f = body.withArray("files").addObject().put("path", path);
        f.put("content", Base64.getEncoder().encodeToString(content)).put("encoding", "base64");
        return this;
    }

    /** Globs of files to keep after the run (e.g. "/work/out/*"). */
    public ExecutionOptions collect(String... globs) {
        return set("collect", List.of(globs));
    }

    public ExecutionOptions stdin(String stdin) {
        return set("stdin", stdin);
    }

    /**
     * Bounds the whole wait of {@code execute} (default: the run's
     * limits.timeout_s + 6 min when given, else none).
     */
    public ExecutionOptions waitTimeout(Duration waitTimeout) {
        this.waitTimeout = waitTimeout;
        return this;
    }

    Integer timeoutS() {
        return intAt("/limits/timeout_s");
    }
}
