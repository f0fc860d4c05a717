// DirListing.java — the API's DirListing schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import java.util.List;

/** A directory listing. */
public record DirListing(
        List<DirEntry> entries) {
}
