// InvalidRequestException.java — the error envelope's code "invalid_request".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** invalid_request: The request was malformed; {@link #field()} names the field. */
public class InvalidRequestException extends ApiException {
    private static final long serialVersionUID = 1L;

    public InvalidRequestException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
