// ContextError.java — the API's ContextError object (docs/api/openapi.yaml).
package dev.sandboxd.model;

/** The exception a context run raised. */
public record ContextError(
        String name,
        String value,
        String traceback) {
}
