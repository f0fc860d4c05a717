// PulledImage.java — the answer to POST /v1/sandbox/images/pull.
package dev.sandboxd.model;

/** The image stored by a pull: its name and manifest digest. */
public record PulledImage(String ref, String digest) {
}
