// SandboxSession.java — a live session: exec (whole, streamed, background),
// processes, files, contexts, watch, patch, delete.
package dev.sandboxd;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.Session;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;

/**
 * A session: its last known state in {@link #info()}, and its operations.
 * Closing it (try-with-resources) deletes it.
 */
public final class SandboxSession implements AutoCloseable {
    private final Transport t;
    private final Sessions sessions;
    private final Processes processes;
    private final SessionFiles files;
    private final Contexts contexts;
    private volatile Session info;

    SandboxSession(Transport t, Session info) {
        this.t = t;
        this.info = info;
        this.sessions = new Sessions(t);
        this.processes = new Processes(t, info.id());
        this.files = new SessionFiles(t, info.id());
        this.contexts = new Contexts(t, info.id());
    }

    public Session info() {
        return info;
    }

    public String id() {
        return info.id();
    }

    /** The status last seen (refresh() asks again). */
    public String status() {
        return info.status();
    }

    public Processes processes() {
        return processes;
    }

    public SessionFiles files() {
        return files;
    }

    public Contexts contexts() {
        return contexts;
    }

    public Session refresh() {
        info = sessions.info(id());
        return info;
    }

    public Session update(SessionPatch patch) {
        info = sessions.update(id(), patch);
        return info;
    }

    public void delete() {
        sessions.delete(id());
    }

    /** Deletes the session (one already gone is not an error). */
    @Override
    public void close() {
        try {
            delete();
        } catch (NotFoundException | ConflictException e) {
            // already terminated
        }
    }

    private ObjectNode execBody(List<String> command, ExecOptions o) {
        ObjectNode b = o.toJson();
        if (command != null) Transport.put(b, "command", command);
        return b;
    }

    private Duration execTimeout(ExecOptions o) {
        if (o.timeout != null) return o.timeout;
        Integer ts = o.timeoutS();
        return Sessions.max(t.cfg.timeout, Duration.ofSeconds((ts != null ? ts : 300) + 30L));
    }

    public ExecResult exec(List<String> command) {
        return exec(command, new ExecOptions());
    }

    /**
     * Runs a command and waits for its result (a non-zero exit or a timeout is
     * a result, not an exception).  command null: options' language and code.
     */
    public ExecResult exec(List<String> command, ExecOptions options) {
        return t.json(new Transport.Call("execInSession").param("id", id()).json(execBody(command, options))
            .timeout(execTimeout(options)), ExecResult.class);
    }

    /** Runs options' language and code. */
    public ExecResult exec(ExecOptions options) {
        return exec(null, options);
    }

    /**
     * The same exec, streamed: {@code stdout} / {@code stderr} events as the
     * output is read, then {@code exit} with the result.  Closing the stream
     * early disconnects, which kills the command.  No client-side bound unless
     * options has a timeout.
     */
    public EventStream<StreamEvent> openStream(List<String> command, ExecOptions options) {
        return t.events(new Transport.Call("execInSession").param("id", id()).json(execBody(command, options))
            .timeout(options.timeout)).map(StreamEvent::of, StreamEvent::isExit);
    }

    /** Streams an exec to listener, event by event; its result once it exits. */
    public ExecResult stream(List<String> command, ExecOptions options, Consumer<StreamEvent> listener) {
        return Processes.drain(openStream(command, options), listener, "exec");
    }

    public ExecResult stream(List<String> command, Consumer<StreamEvent> listener) {
        return stream(command, new ExecOptions(), listener);
    }

    /** Starts a background process: it outlives this connection (stdin, signals, output by pid). */
    public BackgroundProcess start(List<String> command, ExecOptions options) {
        ObjectNode b = execBody(command, options).put("background", true);
        int pid = t.tree(new Transport.Call("execInSession").param("id", id()).json(b).expect(202))
            .path("pid").asInt();
        return new BackgroundProcess(processes, pid);
    }

    public BackgroundProcess start(List<String> command) {
        return start(command, new ExecOptions());
    }

    /** File events under a directory (see SessionFiles#watch). */
    public EventStream<WatchEvent> watch(String path, boolean recursive) {
        return files.watch(path, recursive);
    }

    @Override
    public String toString() {
        return "SandboxSession[" + id() + " " + status() + "]";
    }
}
