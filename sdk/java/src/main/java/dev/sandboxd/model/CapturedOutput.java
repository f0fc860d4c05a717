// CapturedOutput.java — what every result with captured stdout/stderr shares.
package dev.sandboxd.model;

import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Captured output: text when it was UTF-8, else base64 with
 * {@code *_encoding == "base64"}; the {@code *Bytes()} methods give the raw bytes
 * either way.
 */
public interface CapturedOutput {
    String stdout();

    String stdoutEncoding();

    String stderr();

    String stderrEncoding();

    default byte[] stdoutBytes() {
        return decode(stdout(), stdoutEncoding());
    }

    default byte[] stderrBytes() {
        return decode(stderr(), stderrEncoding());
    }

    /** The bytes of an output field given its encoding ("utf-8" or "base64"). */
    static byte[] decode(String text, String encoding) {
        if (text == null) return new byte[0];
        if ("base64".equals(encoding)) return Base64.getDecoder().decode(text);
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
