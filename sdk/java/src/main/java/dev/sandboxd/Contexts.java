// Contexts.java — stateful interpreters (python, node) of a session.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.Context;
import dev.sandboxd.model.ContextRunResult;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** The contexts of one session: interpreters that keep their state between runs. */
public final class Contexts {
    private final Transport t;
    private final String sid;

    Contexts(Transport t, String sid) {
        this.t = t;
        this.sid = sid;
    }

    private Transport.Call call(String op, String cid) {
        return new Transport.Call(op).param("id", sid).param("cid", cid);
    }

    private Duration slow() {
        return Sessions.max(t.cfg.timeout, Duration.ofSeconds(120));
    }

    /** Starts an interpreter ("python" or "node"); ready when this returns. */
    public ContextHandle create(String language) {
        Context c = t.json(new Transport.Call("createContext").param("id", sid)
            .json(Transport.object().put("language", language)).expect(201).timeout(slow()), Context.class);
        return new ContextHandle(this, c);
    }

    public List<Context> list() {
        JsonNode d = t.tree(new Transport.Call("listContexts").param("id", sid));
        return Arrays.asList(Transport.convert(d.path("contexts"), Context[].class));
    }

    public Context get(String cid) {
        return t.json(call("getContext", cid), Context.class);
    }

    public ContextRunResult run(String cid, String code) {
        return run(cid, code, null);
    }

    /** Runs code; {@code result} is the value of its last expression. timeoutS null: the daemon's. */
    public ContextRunResult run(String cid, String code, Integer timeoutS) {
        Transport.Call c = call("runInContext", cid).timeout(Sessions.max(t.cfg.timeout,
            Duration.ofSeconds((timeoutS != null ? timeoutS : 300) + 30L)));
        return t.json(c.json(Transport.put(Transport.object().put("code", code), "timeout_s", timeoutS)),
            ContextRunResult.class);
    }

    /** A fresh interpreter in the same context (its state is lost). */
    public Context restart(String cid) {
        return t.json(call("restartContext", cid).timeout(slow()), Context.class);
    }

    public void delete(String cid) {
        t.send(call("deleteContext", cid).expect(204));
    }
}
