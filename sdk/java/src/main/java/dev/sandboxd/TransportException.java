// TransportException.java — the daemon could not be reached, or the connection broke.
package dev.sandboxd;

/** The daemon could not be reached, or the connection broke. */
public class TransportException extends SandboxdException {
    private static final long serialVersionUID = 1L;

    public TransportException(String message, Throwable cause) {
        super(message, cause);
    }
}
