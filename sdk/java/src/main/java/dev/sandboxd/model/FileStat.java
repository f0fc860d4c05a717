// FileStat.java — the API's FileStat schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;

/** A file's metadata. */
public record FileStat(
        String name,
        String path,
        String type,
        long size,
        String mode,
        double mtime,
        @JsonProperty("link_target") String linkTarget) {
}
