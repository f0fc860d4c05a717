// Network.java — the API's Network schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import java.util.List;

/** A sandbox's egress policy. */
public record Network(
        String egress,
        List<String> allow) {
}
