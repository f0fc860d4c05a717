// SessionPatch.java — the body of PATCH /v1/sandbox/sessions/{id} (SessionPatchRequest).
package dev.sandboxd;

import java.util.Map;

/** Only the fields set change: {@code new SessionPatch().metadata(Map.of("step", "2")).ttlS(3600)}. */
public final class SessionPatch extends JsonOptions<SessionPatch> {
    /** The new egress policy; null resets it to {"egress":"none"}. */
    public SessionPatch network(NetworkRequest network) {
        if (network == null) body.putNull("network");
        else body.set("network", network.body);
        return this;
    }

    /** The new labels (replacing all of them); null clears them. */
    public SessionPatch metadata(Map<String, String> metadata) {
        if (metadata == null) body.putNull("metadata");
        else set("metadata", copy(metadata));
        return this;
    }

    public SessionPatch ttlS(int seconds) {
        return set("ttl_s", seconds);
    }
}
