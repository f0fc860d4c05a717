// Image.java — the API's Image schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/** An image of the host's store. */
public record Image(
        String ref,
        String digest,
        String config,
        List<String> layers,
        Long size,
        JsonNode created) {
}
