// RetryInfo.java — what SandboxdClient.Builder#onRetry is told before each retry.
package dev.sandboxd;

import java.time.Duration;

/**
 * One retry about to happen: the operation (an operationId of the API), the
 * attempt number (1 = the first retry), the delay before it, why ("HTTP 429",
 * "transport: …", "timeout: …"), the Retry-After seconds of the answer (or
 * null) and its request id (or null).
 */
public record RetryInfo(String operation, int attempt, Duration delay, String why, Double retryAfter,
                        String requestId) {
}
