// ContextHandle.java — a handle on one context of a session.
package dev.sandboxd;

import dev.sandboxd.model.Context;
import dev.sandboxd.model.ContextRunResult;

/** A context created by {@link Contexts#create}: its last known state, and its operations. */
public final class ContextHandle {
    private final Contexts contexts;
    private volatile Context info;

    ContextHandle(Contexts contexts, Context info) {
        this.contexts = contexts;
        this.info = info;
    }

    public Context info() {
        return info;
    }

    public String id() {
        return info.id();
    }

    public ContextRunResult run(String code) {
        return contexts.run(id(), code, null);
    }

    public ContextRunResult run(String code, Integer timeoutS) {
        return contexts.run(id(), code, timeoutS);
    }

    public Context restart() {
        info = contexts.restart(id());
        return info;
    }

    public Context refresh() {
        info = contexts.get(id());
        return info;
    }

    public void delete() {
        contexts.delete(id());
    }
}
