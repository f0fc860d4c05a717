// SandboxdTimeoutException.java — the client-side timeout ran out.
package dev.sandboxd;

/** The client-side timeout ran out (a request, a stream, or a wait). */
public class SandboxdTimeoutException extends TransportException {
    private static final long serialVersionUID = 1L;

    public SandboxdTimeoutException(String message, Throwable cause) {
        super(message, cause);
    }
}
