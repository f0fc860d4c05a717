// FileInfo.java — the API's FileInfo schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** A file collected by an execution. */
public record FileInfo(
        String path,
        long size,
        String sha256) {
}
