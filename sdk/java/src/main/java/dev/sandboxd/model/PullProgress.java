// PullProgress.java — a progress event of a streamed image pull.
package dev.sandboxd.model;

/** Bytes of one blob fetched so far ({@code done} == {@code total} once it is whole). */
public record PullProgress(String blob, long done, long total) {
}
