// QuotaExceededException.java — the error envelope's code "quota_exceeded".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** quota_exceeded: A quota (details.limit) or the execution queue is full. */
public class QuotaExceededException extends ApiException {
    private static final long serialVersionUID = 1L;

    public QuotaExceededException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
