// RateLimitedException.java — the error envelope's code "rate_limited".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** rate_limited: The tenant's request rate limit; retried by the client. */
public class RateLimitedException extends ApiException {
    private static final long serialVersionUID = 1L;

    public RateLimitedException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
