// ExecOptions.java — the body of POST /v1/sandbox/sessions/{id}/exec (ExecRequest)
// beyond the command, and the client-side timeout of the call.
package dev.sandboxd;

import java.time.Duration;
import java.util.Map;

/** An exec's options: {@code new ExecOptions().cwd("/work").timeoutS(10)}. */
public final class ExecOptions extends JsonOptions<ExecOptions> {
    Duration timeout;

    /** "python", "node" or "bash", with {@link #code} instead of a command. */
    public ExecOptions language(String language) {
        return set("language", language);
    }

    public ExecOptions code(String code) {
        return set("code", code);
    }

    /** Standard input of a foreground exec. */
    public ExecOptions stdin(String stdin) {
        return set("stdin", stdin);
    }

    public ExecOptions env(Map<String, String> env) {
        return set("env", copy(env));
    }

    public ExecOptions env(String key, String value) {
        return entry("env", key, value);
    }

    public ExecOptions cwd(String cwd) {
        return set("cwd", cwd);
    }

    /** The daemon's limit on this run, in seconds. */
    public ExecOptions timeoutS(int seconds) {
        return set("timeout_s", seconds);
    }

    /** A terminal for a background process. */
    public ExecOptions pty(int cols, int rows) {
        body.putObject("pty").put("cols", cols).put("rows", rows);
        return this;
    }

    /**
     * The client-side bound on this call (default: timeout_s + 30 s, 330 s
     * without one; streams: none).
     */
    public ExecOptions timeout(Duration timeout) {
        this.timeout = timeout;
        return this;
    }

    Integer timeoutS() {
        return intAt("/timeout_s");
    }
}
