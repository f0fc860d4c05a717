// ResultError.java — the API's ResultError schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** Why a run did not produce a normal result. */
public record ResultError(
        String reason,
        String message) {
}
