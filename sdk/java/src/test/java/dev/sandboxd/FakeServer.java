// FakeServer.java — a scripted HTTP server on 127.0.0.1 (the JDK's
// com.sun.net.httpserver) for the unit tests and the contract dump: it
// records every request and answers from a queue of replies, or from a
// function of the request.
package dev.sandboxd;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.function.Function;

final class FakeServer implements AutoCloseable {
    /** A request as received. */
    record Seen(String method, String path, String query, Map<String, String> headers, byte[] body) {
        String header(String name) {
            return headers.get(name.toLowerCase());
        }

        String text() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    /**
     * An answer: status, headers, body chunks (each written and flushed, with
     * pauseMs before each), or drop = close the connection without answering.
     */
    static final class Reply {
        int status = 200;
        final Map<String, String> headers = new LinkedHashMap<>();
        final List<String> chunks = new ArrayList<>();
        long pauseMs;
        boolean drop;

        static Reply json(int status, String body) {
            Reply r = new Reply();
            r.status = status;
            r.headers.put("Content-Type", "application/json");
            r.chunks.add(body);
            return r;
        }

        /** An error envelope of code, with its English and French messages. */
        static Reply error(int status, String code, String details) {
            return json(status, "{\"error\":{\"code\":\"" + code + "\",\"message\":\"msg " + code + "\","
                + "\"message_i18n\":{\"en\":\"msg " + code + "\",\"fr\":\"msg fr " + code + "\"},"
                + "\"request_id\":\"req_" + code + "\",\"details\":" + details + "}}");
        }

        static Reply sse(long pauseMs, String... chunks) {
            Reply r = new Reply();
            r.headers.put("Content-Type", "text/event-stream");
            r.chunks.addAll(List.of(chunks));
            r.pauseMs = pauseMs;
            return r;
        }

        static Reply dropped() {
            Reply r = new Reply();
            r.drop = true;
            return r;
        }

        Reply header(String k, String v) {
            headers.put(k, v);
            return this;
        }

        Reply pause(long ms) {
            pauseMs = ms;
            return this;
        }
    }

    private final HttpServer server;
    private final Deque<Reply> replies = new ArrayDeque<>();
    final List<Seen> seen = Collections.synchronizedList(new ArrayList<>());
    private volatile Function<Seen, Reply> fallback = s -> Reply.json(200, "{}");

    FakeServer() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "fake-server");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/", this::handle);
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Queues replies, answered in order; then the fallback. */
    FakeServer reply(Reply... rs) {
        synchronized (replies) {
            replies.addAll(List.of(rs));
        }
        return this;
    }

    FakeServer fallback(Function<Seen, Reply> f) {
        fallback = f;
        return this;
    }

    Seen last() {
        return seen.get(seen.size() - 1);
    }

    private void handle(HttpExchange ex) throws IOException {
        Map<String, String> h = new LinkedHashMap<>();
        ex.getRequestHeaders().forEach((k, v) -> h.put(k.toLowerCase(), v.get(0)));
        Seen s = new Seen(ex.getRequestMethod(), ex.getRequestURI().getRawPath(), ex.getRequestURI().getRawQuery(),
            h, ex.getRequestBody().readAllBytes());
        seen.add(s);
        Reply r;
        synchronized (replies) {
            r = replies.isEmpty() ? null : replies.poll();
        }
        if (r == null) r = fallback.apply(s);
        if (r.drop) {
            ex.close();
            return;
        }
        r.headers.forEach((k, v) -> ex.getResponseHeaders().add(k, v));
        ex.getResponseHeaders().add("X-Request-Id", "req_header");
        boolean streamed = r.chunks.size() > 1 || "text/event-stream".equals(r.headers.get("Content-Type"));
        try {
            if (!streamed && r.pauseMs > 0) Thread.sleep(r.pauseMs);
            byte[] whole = String.join("", r.chunks).getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(r.status, streamed ? 0 : (whole.length == 0 ? -1 : whole.length));
            try (OutputStream out = ex.getResponseBody()) {
                if (!streamed) {
                    out.write(whole);
                    return;
                }
                for (String c : r.chunks) {
                    if (r.pauseMs > 0) Thread.sleep(r.pauseMs);
                    out.write(c.getBytes(StandardCharsets.UTF_8));
                    out.flush();
                }
            }
        } catch (InterruptedException | IOException e) {
            ex.close(); // the client went away
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
