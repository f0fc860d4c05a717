// BadGatewayException.java — the error envelope's code "bad_gateway".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** bad_gateway: An upstream (a registry, a sandbox's server) failed. */
public class BadGatewayException extends ApiException {
    private static final long serialVersionUID = 1L;

    public BadGatewayException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
