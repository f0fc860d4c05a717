// NotReadyException.java — the error envelope's code "not_ready".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** not_ready: The daemon is not ready yet. */
public class NotReadyException extends ApiException {
    private static final long serialVersionUID = 1L;

    public NotReadyException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
