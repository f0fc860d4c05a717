// ExecutionList.java — the API's ExecutionList schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A page of executions, newest first. */
public record ExecutionList(
        List<Execution> executions,
        @JsonProperty("next_cursor") String nextCursor) {
}
