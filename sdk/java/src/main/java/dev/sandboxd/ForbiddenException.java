// ForbiddenException.java — the error envelope's code "forbidden".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** forbidden: The key may not do this. */
public class ForbiddenException extends ApiException {
    private static final long serialVersionUID = 1L;

    public ForbiddenException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
