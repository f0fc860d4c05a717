// SandboxdException.java — the base of every exception this SDK throws.
package dev.sandboxd;

/** Base of every exception of the SDK (all unchecked). */
public class SandboxdException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public SandboxdException(String message, Throwable cause) {
        super(message, cause);
    }
}
