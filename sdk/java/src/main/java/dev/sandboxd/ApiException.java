// ApiException.java — an error envelope from the daemon
// ({"error": {code, message, message_i18n, request_id, details}}), one
// subclass per code.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import dev.sandboxd.model.Violation;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * An error answer of the daemon.  {@link #getMessage()} is the envelope's
 * message, in the language asked for with {@code Accept-Language}
 * ({@link SandboxdClient.Builder#language}); {@link #messageI18n()} has every
 * language.
 */
public class ApiException extends SandboxdException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;
    private final Map<String, String> messageI18n;
    private final String requestId;
    private final transient JsonNode details;
    private final Double retryAfter;
    private final String body;

    public ApiException(int status, String code, String message, Map<String, String> messageI18n,
                        String requestId, JsonNode details, Double retryAfter, String body) {
        super(message, null);
        this.status = status;
        this.code = code;
        this.messageI18n = Map.copyOf(messageI18n);
        this.requestId = requestId;
        this.details = details == null ? MissingNode.getInstance() : details;
        this.retryAfter = retryAfter;
        this.body = body;
    }

    /** The HTTP status. */
    public int status() {
        return status;
    }

    /** The envelope's code ({@code not_found}, {@code rate_limited}, …), or {@code http_<status>}. */
    public String code() {
        return code;
    }

    /** The message in every language the daemon sent ({@code en}, {@code fr}). */
    public Map<String, String> messageI18n() {
        return messageI18n;
    }

    /** The request id ({@code req_…}): the envelope's, else the X-Request-Id header. */
    public String requestId() {
        return requestId;
    }

    /** {@code details} of the envelope (a missing node when there were none). */
    public JsonNode details() {
        return details;
    }

    /** {@code details.field} of a validation error, or null. */
    public String field() {
        JsonNode f = details.get("field");
        return f != null && f.isTextual() ? f.asText() : null;
    }

    /**
     * {@code details.violations}: every JSON Schema violation of a manifest
     * apply ({@code index} the document, {@code path} in it) or of a tool's
     * input (paths under "/input"); empty for other errors.
     */
    public List<Violation> violations() {
        JsonNode v = details.get("violations");
        if (v == null || !v.isArray()) return List.of();
        return List.of(Transport.convert(v, Violation[].class));
    }

    /** The Retry-After header in seconds, or null. */
    public Double retryAfter() {
        return retryAfter;
    }

    /** The answer's body as text. */
    public String body() {
        return body;
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + ": " + status + " " + code + ": " + getMessage()
            + (requestId != null ? " (request " + requestId + ")" : "");
    }

    interface Factory {
        ApiException make(int status, String code, String message, Map<String, String> i18n,
                          String requestId, JsonNode details, Double retryAfter, String body);
    }

    static final Map<String, Factory> BY_CODE = Map.ofEntries(
        Map.entry("invalid_request", InvalidRequestException::new),
        Map.entry("unauthenticated", UnauthenticatedException::new),
        Map.entry("forbidden", ForbiddenException::new),
        Map.entry("not_found", NotFoundException::new),
        Map.entry("method_not_allowed", MethodNotAllowedException::new),
        Map.entry("conflict", ConflictException::new),
        Map.entry("payload_too_large", PayloadTooLargeException::new),
        Map.entry("quota_exceeded", QuotaExceededException::new),
        Map.entry("rate_limited", RateLimitedException::new),
        Map.entry("internal", InternalException::new),
        Map.entry("bad_gateway", BadGatewayException::new),
        Map.entry("runtime_unavailable", RuntimeUnavailableException::new),
        Map.entry("not_ready", NotReadyException::new));

    /** The exception for an error answer: its envelope's class, or ApiException. */
    static ApiException of(int status, JsonNode parsed, String text, Double retryAfter,
                           String headerRequestId) {
        JsonNode e = parsed == null ? null : parsed.get("error");
        if (e == null || !e.isObject()) {
            String msg = text == null || text.isEmpty() ? "HTTP " + status
                : text.substring(0, Math.min(500, text.length()));
            return new ApiException(status, "http_" + status, msg, Map.of(), headerRequestId,
                                    null, retryAfter, text);
        }
        Function<String, String> str = k -> e.hasNonNull(k) ? e.get(k).asText() : null;
        Map<String, String> i18n = new LinkedHashMap<>();
        if (e.has("message_i18n")) e.get("message_i18n").fields()
            .forEachRemaining(f -> i18n.put(f.getKey(), f.getValue().asText()));
        String code = str.apply("code") != null ? str.apply("code") : "http_" + status;
        String msg = str.apply("message") != null ? str.apply("message") : "HTTP " + status;
        String rid = str.apply("request_id") != null ? str.apply("request_id") : headerRequestId;
        Factory f = BY_CODE.getOrDefault(code, ApiException::new);
        return f.make(status, code, msg, i18n, rid, e.get("details"), retryAfter, text);
    }
}
