// ContractValidation.java — the API's ContractValidation schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import java.util.List;

/** The verdict of a validation: {@code valid} exactly when {@code violations} is empty. */
public record ContractValidation(
        boolean valid,
        List<Violation> violations) {
}
