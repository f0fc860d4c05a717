// StreamEvent.java — one event of an exec stream or of a process's output.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.CapturedOutput;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.OutputChunk;
import java.nio.charset.StandardCharsets;

/**
 * {@code stdout} / {@code stderr} (a chunk: {@link #text()}, {@link #bytes()},
 * {@link #chunk()}), {@code gap} (output dropped: {@link #data()}), or
 * {@code exit} (the last one: {@link #result()}).
 */
public final class StreamEvent {
    private final String event;
    private final JsonNode data;
    private final OutputChunk chunk;
    private final byte[] bytes;
    private final ExecResult result;

    StreamEvent(String event, JsonNode data) {
        this.event = event;
        this.data = data;
        if (isOutput()) {
            chunk = Transport.convert(data, OutputChunk.class);
            bytes = chunk.dataBase64() != null ? CapturedOutput.decode(chunk.dataBase64(), "base64")
                : CapturedOutput.decode(chunk.data() == null ? "" : chunk.data(), "utf-8");
        } else {
            chunk = null;
            bytes = new byte[0];
        }
        result = isExit() ? Transport.convert(data, ExecResult.class) : null;
    }

    /** The events this version of the API sends on these streams; others are skipped. */
    static StreamEvent of(Transport.SseEvent ev) {
        switch (ev.event()) {
            case "stdout": case "stderr": case "gap": case "exit":
                return new StreamEvent(ev.event(), ev.data());
            default:
                return null;
        }
    }

    /** "stdout", "stderr", "gap" or "exit". */
    public String event() {
        return event;
    }

    /** The event's JSON as sent. */
    public JsonNode data() {
        return data;
    }

    public boolean isOutput() {
        return event.equals("stdout") || event.equals("stderr");
    }

    public boolean isStdout() {
        return event.equals("stdout");
    }

    public boolean isStderr() {
        return event.equals("stderr");
    }

    public boolean isExit() {
        return event.equals("exit");
    }

    /** The output chunk of a stdout/stderr event, else null. */
    public OutputChunk chunk() {
        return chunk;
    }

    /** The bytes of a stdout/stderr event (empty for others). */
    public byte[] bytes() {
        return bytes.clone();
    }

    /** The text of a stdout/stderr event (UTF-8, invalid bytes replaced). */
    public String text() {
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** The result of the exit event, else null. */
    public ExecResult result() {
        return result;
    }

    @Override
    public String toString() {
        return "StreamEvent[" + event + " " + data + "]";
    }
}
