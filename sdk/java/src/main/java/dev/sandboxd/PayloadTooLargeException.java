// PayloadTooLargeException.java — the error envelope's code "payload_too_large".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** payload_too_large: The request or an answer would be too large. */
public class PayloadTooLargeException extends ApiException {
    private static final long serialVersionUID = 1L;

    public PayloadTooLargeException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
