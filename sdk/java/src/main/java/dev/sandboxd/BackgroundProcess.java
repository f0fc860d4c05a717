// BackgroundProcess.java — a handle on one background process of a session.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.Process;
import dev.sandboxd.model.ProcessOutput;
import java.time.Duration;

/** A background process started by {@link SandboxSession#start}. */
public final class BackgroundProcess {
    private final Processes procs;
    private final int pid;

    BackgroundProcess(Processes procs, int pid) {
        this.procs = procs;
        this.pid = pid;
    }

    public int pid() {
        return pid;
    }

    public Process get() {
        return procs.get(pid);
    }

    public ProcessOutput output() {
        return procs.output(pid);
    }

    public ProcessOutput output(Long stdoutOffset, Long stderrOffset) {
        return procs.output(pid, stdoutOffset, stderrOffset);
    }

    public EventStream<StreamEvent> follow() {
        return procs.follow(pid);
    }

    public JsonNode stdin(String data) {
        return procs.stdin(pid, data, false);
    }

    public JsonNode stdin(String data, boolean eof) {
        return procs.stdin(pid, data, eof);
    }

    public JsonNode stdin(byte[] data, boolean eof) {
        return procs.stdin(pid, data, eof);
    }

    public JsonNode signal(String signal) {
        return procs.signal(pid, signal);
    }

    public void resize(int cols, int rows) {
        procs.resize(pid, cols, rows);
    }

    public ExecResult waitFor() {
        return procs.waitFor(pid);
    }

    public ExecResult waitFor(Duration timeout) {
        return procs.waitFor(pid, timeout);
    }

    @Override
    public String toString() {
        return "BackgroundProcess[" + pid + "]";
    }
}
