// Tool.java — the API's Tool schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A tool of the tenant with its manifest as stored; generation is 1 when created, one more at each change. */
public record Tool(
        String name,
        String profile,
        String image,
        int generation,
        String digest,
        ToolManifest manifest,
        @JsonProperty("created_at") String createdAt,
        @JsonProperty("updated_at") String updatedAt) {
}
