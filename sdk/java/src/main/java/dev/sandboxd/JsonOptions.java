// JsonOptions.java — the base of the option classes: each is a typed, fluent
// face over the JSON object it sends.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;

/** Fluent options that become a request's JSON body (fields left unset are not sent). */
public abstract class JsonOptions<T extends JsonOptions<T>> {
    final ObjectNode body = Transport.object();

    JsonOptions() {
    }

    @SuppressWarnings("unchecked")
    final T self() {
        return (T) this;
    }

    /** Sets a field; null removes it. */
    final T set(String key, Object value) {
        if (value == null) body.remove(key);
        else Transport.put(body, key, value);
        return self();
    }

    /** Adds one entry to an object field (env, metadata). */
    final T entry(String field, String key, String value) {
        body.withObject("/" + field).put(key, value);
        return self();
    }

    /** A field this version of the SDK does not know, sent as given (a String, number, List, Map, JsonNode). */
    public T extra(String key, Object value) {
        return set(key, value);
    }

    /** The JSON this sends (a copy). */
    public ObjectNode toJson() {
        return body.deepCopy();
    }

    /** The integer at a JSON pointer ("/limits/timeout_s"), or null. */
    final Integer intAt(String pointer) {
        JsonNode v = body.at(pointer);
        return v != null && v.canConvertToInt() ? v.asInt() : null;
    }

    static Map<String, String> copy(Map<String, String> m) {
        return m == null ? null : Map.copyOf(m);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + body;
    }
}
