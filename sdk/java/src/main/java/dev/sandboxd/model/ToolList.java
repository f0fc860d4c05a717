// ToolList.java — the API's ToolList schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A page of tools, in name order; nextCursor is null on the last. */
public record ToolList(
        List<Tool> tools,
        @JsonProperty("next_cursor") String nextCursor) {
}
