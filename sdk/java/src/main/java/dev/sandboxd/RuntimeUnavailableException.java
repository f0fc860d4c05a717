// RuntimeUnavailableException.java — the error envelope's code "runtime_unavailable".
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** runtime_unavailable: The profile's runtime is unavailable now. */
public class RuntimeUnavailableException extends ApiException {
    private static final long serialVersionUID = 1L;

    public RuntimeUnavailableException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, JsonNode details, Double retryAfter, String body) {
        super(status, code, message, messageI18n, requestId, details, retryAfter, body);
    }
}
