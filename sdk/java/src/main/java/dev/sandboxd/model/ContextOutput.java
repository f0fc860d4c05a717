// ContextOutput.java — the API's ContextOutput object (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A rich output of a context run (e.g. image/png as base64). */
public record ContextOutput(
        @JsonProperty("mime_type") String mimeType,
        String data) {
}
