// OutputChunk.java — the API's OutputChunk object (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A chunk of output in a stream (text in data, or bytes in data_base64). */
public record OutputChunk(
        String data,
        @JsonProperty("data_base64") String dataBase64,
        long offset) {
}
