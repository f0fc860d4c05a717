// Images.java — client.images(): the host's image store.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.Image;
import dev.sandboxd.model.PullProgress;
import dev.sandboxd.model.PulledImage;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;

/** Images: list (any key); pull, delete, gc (admin keys). */
public final class Images {
    private static final Duration PULL_TIMEOUT = Duration.ofMinutes(30);
    private final Transport t;

    Images(Transport t) {
        this.t = t;
    }

    public List<Image> list() {
        return Arrays.asList(Transport.convert(t.tree(new Transport.Call("listImages")).path("images"),
            Image[].class));
    }

    /** Pulls an image into the store; {ref, digest} once stored. */
    public PulledImage pull(String ref) {
        return t.json(new Transport.Call("pullImage").json(Transport.object().put("ref", ref))
            .timeout(PULL_TIMEOUT), PulledImage.class);
    }

    /** The same pull, with each progress event ({blob, done, total}) handed to progress. */
    public PulledImage pull(String ref, Consumer<PullProgress> progress) {
        try (EventStream<Transport.SseEvent> events = t.events(new Transport.Call("pullImage")
                .json(Transport.object().put("ref", ref)).timeout(PULL_TIMEOUT))) {
            for (Transport.SseEvent ev : events) {
                switch (ev.event()) {
                    case "progress":
                        progress.accept(Transport.convert(ev.data(), PullProgress.class));
                        break;
                    case "done": case "json":
                        return Transport.convert(ev.data(), PulledImage.class);
                    case "error":
                        JsonNode envelope = Transport.object().set("error", ev.data());
                        int status = "bad_gateway".equals(ev.data().path("code").asText()) ? 502 : 500;
                        throw ApiException.of(status, envelope, envelope.toString(), null, null);
                    default:
                        break;
                }
            }
        }
        throw new TransportException("pull of " + ref + ": the stream ended without done or error", null);
    }

    /** Removes an image's name from the store (gc frees its blobs). */
    public void delete(String ref) {
        t.send(new Transport.Call("deleteImage").param("ref*", ref).expect(204));
    }

    /** Frees the blobs no image uses; what was removed. */
    public JsonNode gc() {
        return t.tree(new Transport.Call("collectImageGarbage"));
    }
}
