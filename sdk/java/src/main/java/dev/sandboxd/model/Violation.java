// Violation.java — one violation of a JSON Schema contract: the items of
// ContractValidation's violations and of an error's details.violations
// (docs/api/openapi.yaml, Error).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.Map;

/**
 * One JSON Schema violation: {@code path} is the JSON pointer of the value at
 * fault ("" for the whole document; under "/input" for a tool's input),
 * {@code message} in the request's language, {@code index} the document of an
 * apply it belongs to (null elsewhere).
 */
public record Violation(
        Integer index,
        String path,
        String message,
        @JsonProperty("message_i18n") Map<String, String> messageI18n) {
}
