// DirEntry.java — the API's DirEntry schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** One entry of a directory listing. */
public record DirEntry(
        String name,
        String path,
        String type,
        long size,
        String mode,
        double mtime) {
}
