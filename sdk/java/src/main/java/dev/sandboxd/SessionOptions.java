// SessionOptions.java — the body of POST /v1/sandbox/sessions (SessionCreateRequest).
package dev.sandboxd;

import java.util.Map;

/** A session's request: {@code new SessionOptions().profile("container").ttlS(900)}. */
public final class SessionOptions extends JsonOptions<SessionOptions> {
    public SessionOptions profile(String profile) {
        return set("profile", profile);
    }

    public SessionOptions image(String image) {
        return set("image", image);
    }

    public SessionOptions limits(LimitsRequest limits) {
        return set("limits", limits == null ? null : limits.body);
    }

    public SessionOptions network(NetworkRequest network) {
        return set("network", network == null ? null : network.body);
    }

    public SessionOptions env(Map<String, String> env) {
        return set("env", copy(env));
    }

    public SessionOptions env(String key, String value) {
        return entry("env", key, value);
    }

    public SessionOptions metadata(Map<String, String> metadata) {
        return set("metadata", copy(metadata));
    }

    public SessionOptions metadata(String key, String value) {
        return entry("metadata", key, value);
    }

    /** Idle lifetime in seconds. */
    public SessionOptions ttlS(int seconds) {
        return set("ttl_s", seconds);
    }
}
