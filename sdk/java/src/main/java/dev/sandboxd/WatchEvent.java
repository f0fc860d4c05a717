// WatchEvent.java — one event of a session's file watch.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * {@code ready}, then {@code create} / {@code modify} / {@code delete} /
 * {@code move}, {@code overflow}, and {@code end} (the last).  The fields
 * of {@link #data()} depend on the event: {@code type}, {@code path},
 * {@code dir}, {@code from}, {@code to}, {@code dropped}, {@code reason}.
 */
public record WatchEvent(String event, JsonNode data) {
    /** data.type (the change), or null. */
    public String type() {
        return text("type");
    }

    /** data.path, or null. */
    public String path() {
        return text("path");
    }

    private String text(String k) {
        JsonNode v = data == null ? null : data.get(k);
        return v == null || v.isNull() ? null : v.asText();
    }
}
