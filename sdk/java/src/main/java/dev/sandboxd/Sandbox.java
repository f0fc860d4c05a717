// Sandbox.java — client.sandbox(): execute (create and wait), executions,
// sessions, profiles.
package dev.sandboxd;

import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ExecutionCreated;
import dev.sandboxd.model.ProfileList;
import java.time.Duration;
import java.util.List;

/** Runs code: one-shot executions and sessions. */
public final class Sandbox {
    private final Transport t;
    private final Executions executions;
    private final Sessions sessions;

    Sandbox(Transport t) {
        this.t = t;
        this.executions = new Executions(t);
        this.sessions = new Sessions(t);
    }

    public Executions executions() {
        return executions;
    }

    public Sessions sessions() {
        return sessions;
    }

    /** Runs command on image (null: the profile's) with the default profile, and waits for the result. */
    public Execution execute(String image, List<String> command) {
        return execute(image, command, new ExecutionOptions());
    }

    /**
     * The seed's {@code sandbox.execute}: creates an execution and waits for
     * its final state.  A non-zero exit, a timeout or an OOM kill is a result,
     * not an exception.
     */
    public Execution execute(String image, List<String> command, ExecutionOptions options) {
        return execute(options.image(image).command(command));
    }

    /** Creates the execution options describe and waits for its final state. */
    public Execution execute(ExecutionOptions options) {
        ExecutionCreated created = executions.create(options);
        Duration wait = options.waitTimeout;
        Integer ts = options.timeoutS();
        if (wait == null && ts != null) wait = Duration.ofSeconds(ts + 360L);
        return executions.wait(created.id(), wait);
    }

    /** The profiles this key may use. */
    public ProfileList profiles() {
        return t.json(new Transport.Call("listProfiles"), ProfileList.class);
    }
}
