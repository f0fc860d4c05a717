// UnauthenticatedException.java — the error envelope's code "unauthenticated".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** unauthenticated: No API key, or an unknown one. */
public class UnauthenticatedException extends ApiException {
    private static final long serialVersionUID = 1L;

    public UnauthenticatedException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
