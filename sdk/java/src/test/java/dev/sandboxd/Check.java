// Check.java — the assertions of the unit tests and of e2e/Scenario.java.
package dev.sandboxd;

import java.util.Objects;

/** Plain assertions (no test framework to install). */
public final class Check {
    private Check() {
    }

    /** A block that may throw anything. */
    public interface Body {
        void run() throws Exception;
    }

    public static void check(boolean cond, Object what) {
        if (!cond) throw new AssertionError(String.valueOf(what));
    }

    public static void eq(Object want, Object got) {
        if (!Objects.equals(want, got)) throw new AssertionError("want " + want + ", got " + got);
    }

    /** Runs body, which must throw a T; returns it. */
    public static <T extends Throwable> T expect(Class<T> type, Body body) throws Exception {
        try {
            body.run();
        } catch (Throwable e) {
            if (type.isInstance(e)) return type.cast(e);
            throw new AssertionError("expected " + type.getSimpleName() + ", got " + e, e);
        }
        throw new AssertionError("expected " + type.getSimpleName() + ", nothing thrown");
    }
}
