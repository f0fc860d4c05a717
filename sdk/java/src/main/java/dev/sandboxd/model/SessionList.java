// SessionList.java — the API's SessionList schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A page of sessions, newest first. */
public record SessionList(
        List<Session> sessions,
        @JsonProperty("next_cursor") String nextCursor) {
}
