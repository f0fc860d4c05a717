// FileWritten.java — the API's FileWritten schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** A file written in a session. */
public record FileWritten(
        String path,
        long size) {
}
