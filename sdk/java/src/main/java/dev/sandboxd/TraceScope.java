// TraceScope.java — a W3C traceparent for the calls a thread makes inside a
// try-with-resources block.
package dev.sandboxd;

/**
 * Sends {@code traceparent} with every request this thread makes until
 * closed (scopes nest; closing restores the outer one):
 * <pre>{@code
 * try (TraceScope t = TraceScope.of("00-4bf9…-00f0…-01")) {
 *     session.exec(List.of("make"));
 * }
 * }</pre>
 * Without a scope the client's {@code traceparent} supplier is asked, then the
 * {@code TRACEPARENT} environment variable (which sandboxd sets inside its
 * sandboxes).
 */
public final class TraceScope implements AutoCloseable {
    private static final ThreadLocal<String> CURRENT = new ThreadLocal<>();
    private final String previous;
    private boolean closed;

    private TraceScope(String traceparent) {
        this.previous = CURRENT.get();
        CURRENT.set(traceparent);
    }

    /** Opens a scope sending traceparent. */
    public static TraceScope of(String traceparent) {
        return new TraceScope(traceparent);
    }

    /** The traceparent of the innermost open scope of this thread, or null. */
    public static String current() {
        return CURRENT.get();
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (previous == null) CURRENT.remove();
        else CURRENT.set(previous);
    }
}
