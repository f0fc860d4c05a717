// MethodNotAllowedException.java — the error envelope's code "method_not_allowed".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** method_not_allowed: The route does not take this method. */
public class MethodNotAllowedException extends ApiException {
    private static final long serialVersionUID = 1L;

    public MethodNotAllowedException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
