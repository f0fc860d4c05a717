// Processes.java — a session's background processes by pid: output (JSON or
// followed live), stdin, signals, terminal size, wait.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.Process;
import dev.sandboxd.model.ProcessOutput;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

/** The background processes of one session. */
public final class Processes {
    private final Transport t;
    private final String sid;

    Processes(Transport t, String sid) {
        this.t = t;
        this.sid = sid;
    }

    private Transport.Call call(String op, int pid) {
        return new Transport.Call(op).param("id", sid).param("pid", pid);
    }

    public List<Process> list() {
        JsonNode d = t.tree(new Transport.Call("listProcesses").param("id", sid));
        return Arrays.asList(Transport.convert(d.path("processes"), Process[].class));
    }

    public Process get(int pid) {
        return t.json(call("getProcess", pid), Process.class);
    }

    /** The kept output from the start. */
    public ProcessOutput output(int pid) {
        return output(pid, null, null);
    }

    /** The kept output from these offsets (null: the start; pass back *_next_offset to continue). */
    public ProcessOutput output(int pid, Long stdoutOffset, Long stderrOffset) {
        return t.json(call("getProcessOutput", pid).query("stdout_offset", stdoutOffset)
            .query("stderr_offset", stderrOffset), ProcessOutput.class);
    }

    /** Replays the kept output, then follows it live; ends with {@code exit}. */
    public EventStream<StreamEvent> follow(int pid) {
        return follow(pid, null, null, null);
    }

    /** follow from offsets; timeout (null: none) bounds the whole stream. */
    public EventStream<StreamEvent> follow(int pid, Long stdoutOffset, Long stderrOffset, Duration timeout) {
        return t.events(call("getProcessOutput", pid).query("stdout_offset", stdoutOffset)
            .query("stderr_offset", stderrOffset).timeout(timeout)).map(StreamEvent::of, StreamEvent::isExit);
    }

    /** Appends data to the process's stdin; eof closes it after.  {"written", "eof"}. */
    public JsonNode stdin(int pid, byte[] data, boolean eof) {
        return t.tree(call("writeProcessStdin", pid).query("eof", eof ? "true" : null)
            .body(data, "application/octet-stream"));
    }

    public JsonNode stdin(int pid, String data, boolean eof) {
        return stdin(pid, data.getBytes(StandardCharsets.UTF_8), eof);
    }

    /** Sends a signal by name (TERM, INT, KILL, …) to the process group.  {"pid", "signal"}. */
    public JsonNode signal(int pid, String signal) {
        return t.tree(call("signalProcess", pid).json(Transport.object().put("signal", signal)));
    }

    /** Resizes the terminal of a process started with a pty. */
    public void resize(int pid, int cols, int rows) {
        t.send(call("resizeProcessTerminal", pid).json(Transport.object().put("cols", cols).put("rows", rows)));
    }

    /** Follows the output until the process ends; its result. */
    public ExecResult waitFor(int pid) {
        return waitFor(pid, null);
    }

    /** waitFor, bounded by timeout (null: none): SandboxdTimeoutException past it. */
    public ExecResult waitFor(int pid, Duration timeout) {
        return drain(follow(pid, null, null, timeout), ev -> { }, "process " + pid);
    }

    /** Reads a stream to its end, handing each event to listener; the exit event's result. */
    static ExecResult drain(EventStream<StreamEvent> events, Consumer<StreamEvent> listener, String what) {
        try (events) {
            for (StreamEvent ev : events) {
                listener.accept(ev);
                if (ev.isExit()) return ev.result();
            }
        }
        throw new TransportException("the output stream of " + what + " ended without exit", null);
    }
}
