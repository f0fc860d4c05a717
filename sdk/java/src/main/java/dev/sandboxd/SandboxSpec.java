// SandboxSpec.java — what executions and sessions both ask of their sandbox:
// profile, image, limits, network, env, metadata.
package dev.sandboxd;

import java.util.Map;

/** The sandbox part of {@link ExecutionOptions} and {@link SessionOptions}. */
public abstract class SandboxSpec<T extends SandboxSpec<T>> extends JsonOptions<T> {
    SandboxSpec() {
    }

    /** The profile (null: the daemon's default). */
    public T profile(String profile) {
        return set("profile", profile);
    }

    /** An image of the host's store (pulled on first use unless the daemon says never); null: the profile's. */
    public T image(String image) {
        return set("image", image);
    }

    public T limits(LimitsRequest limits) {
        return set("limits", limits == null ? null : limits.body);
    }

    public T network(NetworkRequest network) {
        return set("network", network == null ? null : network.body);
    }

    public T env(Map<String, String> env) {
        return set("env", copy(env));
    }

    public T env(String key, String value) {
        return entry("env", key, value);
    }

    /** Labels (project, agent, …) that usage and listings group by. */
    public T metadata(Map<String, String> metadata) {
        return set("metadata", copy(metadata));
    }

    public T metadata(String key, String value) {
        return entry("metadata", key, value);
    }
}
