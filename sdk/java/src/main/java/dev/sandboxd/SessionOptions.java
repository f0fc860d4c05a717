// SessionOptions.java — the body of POST /v1/sandbox/sessions (SessionCreateRequest).
package dev.sandboxd;

/** A session's request: {@code new SessionOptions().profile("container").ttlS(900)}. */
public final class SessionOptions extends SandboxSpec<SessionOptions> {
    /** Idle lifetime in seconds. */
    public SessionOptions ttlS(int seconds) {
        return set("ttl_s", seconds);
    }
}
