// ConflictException.java — the error envelope's code "conflict".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** conflict: The object's state forbids this now. */
public class ConflictException extends ApiException {
    private static final long serialVersionUID = 1L;

    public ConflictException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
