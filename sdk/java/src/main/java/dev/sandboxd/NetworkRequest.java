// NetworkRequest.java — the egress policy asked for a sandbox.
package dev.sandboxd;

import java.util.List;

/** {@code NetworkRequest.none()} or {@code NetworkRequest.allowlist("pypi.org", "*.pythonhosted.org")}. */
public final class NetworkRequest extends JsonOptions<NetworkRequest> {
    public static NetworkRequest none() {
        return new NetworkRequest().set("egress", "none");
    }

    public static NetworkRequest allowlist(String... hosts) {
        return new NetworkRequest().set("egress", "allowlist").set("allow", List.of(hosts));
    }
}
