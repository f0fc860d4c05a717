// Executions.java — client.sandbox().executions(): one-shot runs by id.
package dev.sandboxd;

import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ExecutionCreated;
import dev.sandboxd.model.ExecutionList;
import java.time.Duration;
import java.util.List;

/** Executions: create, get (long-poll), wait, cancel, list, collected files. */
public final class Executions {
    private final Transport t;

    Executions(Transport t) {
        this.t = t;
    }

    /** Queues an execution; answers at once (retried only on a 429/503 refusal: nothing stored). */
    public ExecutionCreated create(String image, List<String> command, ExecutionOptions options) {
        return create(options.image(image).command(command));
    }

    public ExecutionCreated create(ExecutionOptions options) {
        return t.json(new Transport.Call("createExecution").json(options.body).expect(202),
            ExecutionCreated.class);
    }

    public Execution get(String id) {
        return get(id, null);
    }

    /** With waitS (0–60) the daemon answers once the execution is final or after waitS seconds. */
    public Execution get(String id, Double waitS) {
        Transport.Call c = new Transport.Call("getExecution").param("id", id).query("wait_s", waitS);
        if (waitS != null) c.timeout(t.cfg.timeout.plusMillis((long) (waitS * 1000)));
        return t.json(c, Execution.class);
    }

    /** Long-polls until the execution is final. */
    public Execution wait(String id) {
        return wait(id, null);
    }

    /** Long-polls until final; past timeout (null: none) a SandboxdTimeoutException. */
    public Execution wait(String id, Duration timeout) {
        long deadline = timeout == null ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
        for (;;) {
            double left = timeout == null ? 30 : Math.max(0, (deadline - System.nanoTime()) / 1e9);
            Execution ex = get(id, Math.round(Math.min(left, 30) * 10) / 10.0);
            if (ex.isFinal()) return ex;
            if (System.nanoTime() >= deadline) {
                throw new SandboxdTimeoutException("execution " + id + " still " + ex.status() + " after "
                    + timeout.toMillis() + " ms", null);
            }
        }
    }

    /** Cancels a queued or running execution (its status becomes killed, reason cancelled). */
    public Execution cancel(String id) {
        return t.json(new Transport.Call("cancelExecution").param("id", id)
            .timeout(t.cfg.timeout.plusSeconds(5)), Execution.class);
    }

    /** The newest executions (first page). */
    public ExecutionList list() {
        return list(null, null, null);
    }

    /** A page of executions, newest first; any argument may be null. */
    public ExecutionList list(String status, Integer limit, String cursor) {
        return t.json(new Transport.Call("listExecutions").query("status", status).query("limit", limit)
            .query("cursor", cursor), ExecutionList.class);
    }

    /** Every execution of the tenant (status null: any), newest first, pages fetched as needed. */
    public Iterable<Execution> iterate(String status) {
        return Paging.all(cursor -> {
            ExecutionList l = list(status, 200, cursor);
            return new Paging.Page<>(l.executions(), l.nextCursor());
        });
    }

    /** A collected file's bytes (path: one of files[].path). */
    public byte[] download(String id, String path) {
        return t.bytes(new Transport.Call("getExecutionFile").param("id", id).query("path", path).accept("*/*"));
    }
}
