// LimitsRequest.java — the limits asked for a sandbox (any subset).
package dev.sandboxd;

/**
 * Limits asked for: {@code new LimitsRequest().cpu("500m").memory("256Mi").timeoutS(30)}.
 * Quantities are strings ("500m", "256Mi") or numbers (cores, bytes).
 */
public final class LimitsRequest extends JsonOptions<LimitsRequest> {
    public LimitsRequest cpu(Object cpu) {
        return set("cpu", cpu);
    }

    public LimitsRequest memory(Object memory) {
        return set("memory", memory);
    }

    public LimitsRequest disk(Object disk) {
        return set("disk", disk);
    }

    public LimitsRequest pids(int pids) {
        return set("pids", pids);
    }

    /** Wall-clock limit of a run, in seconds. */
    public LimitsRequest timeoutS(int seconds) {
        return set("timeout_s", seconds);
    }

    public LimitsRequest outputBytes(Object bytes) {
        return set("output_bytes", bytes);
    }
}
