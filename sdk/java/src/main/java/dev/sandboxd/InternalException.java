// InternalException.java — the error envelope's code "internal".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** internal: The daemon failed. */
public class InternalException extends ApiException {
    private static final long serialVersionUID = 1L;

    public InternalException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
