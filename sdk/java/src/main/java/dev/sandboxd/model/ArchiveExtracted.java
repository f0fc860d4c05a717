// ArchiveExtracted.java — the API's ArchiveExtracted schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** What extracting an archive wrote. */
public record ArchiveExtracted(
        String path,
        long entries,
        long bytes) {
}
