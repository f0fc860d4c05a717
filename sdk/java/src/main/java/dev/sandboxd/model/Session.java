// Session.java — the API's Session schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;
import java.util.Map;

/** A session: a sandbox that lives between calls. */
public record Session(
        String id,
        String status,
        String reason,
        String profile,
        String runtime,
        String image,
        Limits limits,
        Network network,
        List<String> capabilities,
        @JsonProperty("created_at") String createdAt,
        @JsonProperty("expires_at") String expiresAt,
        @JsonProperty("updated_at") String updatedAt,
        Map<String, String> metadata,
        @JsonProperty("ttl_s") Integer ttlS) {
}
