// Transport.java — the HTTP layer: one java.net.http request per call, the
// API key, Accept-Language, traceparent and User-Agent headers, JSON in and
// out (Jackson), error envelopes turned into exceptions, bounded retries with
// exponential backoff and jitter on 429/503 (honouring Retry-After), client
// timeouts, and Server-Sent Events read as a stream of (event, data).
package dev.sandboxd;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

final class Transport {
    static final ObjectMapper JSON = new ObjectMapper()
        .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    static final Set<String> IDEMPOTENT = Set.of("GET", "HEAD", "PUT", "DELETE", "OPTIONS");
    /** Closes streams whose own timeout ran out. */
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "sandboxd-stream-timeouts");
        t.setDaemon(true);
        return t;
    });

    final SandboxdClient.Builder cfg;
    final String baseUrl;
    final String apiKey;
    final HttpClient http;

    Transport(SandboxdClient.Builder cfg) {
        this.cfg = cfg;
        String url = cfg.baseUrl != null ? cfg.baseUrl : cfg.env.apply("SANDBOXD_URL");
        if (url == null || url.isEmpty()) url = SandboxdClient.DEFAULT_URL;
        this.baseUrl = url.replaceAll("/+$", "");
        if (!this.baseUrl.matches("https?://[^/]+(/.*)?")) {
            throw new IllegalArgumentException("baseUrl must be http(s)://host[:port]: " + this.baseUrl);
        }
        this.apiKey = cfg.apiKey != null ? cfg.apiKey : cfg.env.apply("SANDBOXD_API_KEY");
        // HTTP/1.1: the daemon speaks it, and h2c would send an Upgrade header.
        this.http = cfg.httpClient != null ? cfg.httpClient : HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(cfg.timeout)
            .build();
    }

    // ---- one call ---------------------------------------------------------------

    /** What one request sends; built fluently by the resources. */
    static final class Call {
        final String op;
        final Map<String, String> params = new LinkedHashMap<>();
        final Map<String, String> query = new LinkedHashMap<>();
        byte[] body;
        String contentType;
        String accept = "application/json";
        Duration timeout;
        boolean stream;
        Set<Integer> expect;

        Call(String op) {
            if (!Routes.ROUTES.containsKey(op)) throw new IllegalArgumentException("no route " + op);
            this.op = op;
        }

        Call param(String k, Object v) {
            params.put(k, String.valueOf(v));
            return this;
        }

        /** A query parameter; null is left out, booleans are true/false. */
        Call query(String k, Object v) {
            if (v instanceof Double && (Double) v == Math.rint((Double) v)) v = ((Double) v).longValue();
            if (v != null) query.put(k, String.valueOf(v));
            return this;
        }

        Call json(JsonNode node) {
            try {
                body = JSON.writeValueAsBytes(node);
            } catch (JsonProcessingException e) {
                throw new IllegalArgumentException(e);
            }
            contentType = "application/json";
            return this;
        }

        Call body(byte[] data, String type) {
            body = data;
            contentType = type;
            return this;
        }

        Call accept(String a) {
            accept = a;
            return this;
        }

        /** This call's timeout; null keeps the client's (none for a stream). */
        Call timeout(Duration d) {
            if (d != null) timeout = d;
            return this;
        }

        Call expect(Integer... statuses) {
            expect = Set.of(statuses);
            return this;
        }
    }

    /** A whole answer, or an open one (stream != null). */
    record Response(int status, HttpHeaders headers, byte[] body, InputStream stream) {
        String header(String name) {
            return headers.firstValue(name).orElse(null);
        }
    }

    /** An event of an SSE answer; a non-SSE answer to a stream request is one event "json". */
    record SseEvent(String event, JsonNode data) {
    }

    static String pct(String s, String safe) {
        StringBuilder b = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
            char c = (char) (x & 0xff);
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                || "-._~".indexOf(c) >= 0 || safe.indexOf(c) >= 0) {
                b.append(c);
            } else {
                b.append('%').append(String.format("%02X", x & 0xff));
            }
        }
        return b.toString();
    }

    URI uri(Call c) {
        String p = Routes.ROUTES.get(c.op).path();
        for (Map.Entry<String, String> e : c.params.entrySet()) {
            String safe = e.getKey().endsWith("*") ? "/:@" : "";
            p = p.replace("{" + e.getKey() + "}", pct(e.getValue(), safe));
        }
        if (p.contains("{")) throw new IllegalArgumentException(c.op + ": missing path parameter in " + p);
        List<String> q = new ArrayList<>();
        c.query.forEach((k, v) -> q.add(pct(k, "") + "=" + pct(v, "")));
        return URI.create(baseUrl + p + (q.isEmpty() ? "" : "?" + String.join("&", q)));
    }

    String traceparent() {
        String tp = TraceScope.current();
        if (tp == null && cfg.traceparent != null) tp = cfg.traceparent.get();
        if (tp == null) tp = cfg.env.apply("TRACEPARENT"); // inside a sandbox: the daemon's own
        return tp == null || tp.isEmpty() ? null : tp;
    }

    Map<String, String> headers(Call c) {
        Map<String, String> h = new LinkedHashMap<>();
        h.put("User-Agent", cfg.userAgent);
        h.put("Accept", c.stream ? "text/event-stream" : c.accept);
        if (apiKey != null && !apiKey.isEmpty()) h.put("Authorization", "Bearer " + apiKey);
        if (cfg.language != null) h.put("Accept-Language", cfg.language);
        String tp = traceparent();
        if (tp != null) h.put("traceparent", tp);
        if (c.contentType != null) h.put("Content-Type", c.contentType);
        h.putAll(cfg.headers);
        return h;
    }

    // ---- retries ----------------------------------------------------------------

    static Double retryAfter(HttpHeaders h) {
        String v = h.firstValue("Retry-After").orElse(null);
        if (v == null) return null;
        try {
            double d = Double.parseDouble(v.trim());
            return d >= 0 && Double.isFinite(d) ? d : null;
        } catch (NumberFormatException e) {
            return null; // an HTTP date: our own backoff instead
        }
    }

    /**
     * 429 and 503 are answered before the daemon stores or runs anything
     * ("nothing is stored for a refused request"), so retrying them cannot
     * duplicate a creation.  Of the 429s only those that waiting cures are
     * retried: the rate limit and the full execution queue; a tenant quota
     * (details.limit sessions / executions / cpu_seconds_per_day) is not.
     */
    static boolean shouldRetry(int status, JsonNode body) {
        if (status != 429 && status != 503) return false;
        JsonNode e = body == null ? null : body.get("error");
        if (e == null || !e.isObject()) return status == 503;
        String code = e.path("code").asText("");
        if (status == 503) return code.equals("runtime_unavailable") || code.equals("not_ready");
        if (code.equals("rate_limited")) return true;
        JsonNode limit = e.path("details").path("limit");
        return code.equals("quota_exceeded") && (limit.isMissingNode() || limit.isNull() || limit.asText().isEmpty());
    }

    /** The delay before retry number attempt+1. */
    Duration delay(int attempt, Double retryAfter) {
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        if (retryAfter != null) {
            // Whole seconds; a little jitter spreads clients released by the same refill.
            double s = Math.min(retryAfter, cfg.maxRetryAfter.toMillis() / 1000.0);
            return Duration.ofMillis((long) (s * 1000) + rnd.nextLong(100));
        }
        long cap = Math.min(cfg.maxBackoff.toMillis(), cfg.backoff.toMillis() << Math.min(attempt, 30));
        return Duration.ofMillis(cap / 2 + rnd.nextLong(cap / 2 + 1)); // equal jitter
    }

    private int backoff(String op, int attempt, String why, Double retryAfter, String requestId) {
        Duration d = delay(attempt, retryAfter);
        if (cfg.onRetry != null) {
            cfg.onRetry.accept(new RetryInfo(op, attempt + 1, d, why, retryAfter, requestId));
        }
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(op + ": interrupted while backing off", e);
        }
        return attempt + 1;
    }

    // ---- sending ----------------------------------------------------------------

    private static <T> T await(CompletableFuture<T> f, Duration t) throws IOException, InterruptedException {
        try {
            return t == null ? f.get() : f.get(t.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new HttpTimeoutException("no answer within " + t.toMillis() + " ms");
        } catch (InterruptedException e) {
            f.cancel(true);
            throw e;
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof IOException) throw (IOException) cause;
            throw new IOException(cause);
        }
    }

    /** Sends a call; the answer when its status is < 400 (and expected), else throws. */
    Response send(Call c) {
        String method = Routes.ROUTES.get(c.op).method();
        URI uri = uri(c);
        HttpRequest.Builder rb = HttpRequest.newBuilder(uri).method(method, c.body == null
            ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(c.body));
        headers(c).forEach(rb::header);
        // A stream has no bound unless the call gives one; its headers still come within the client's.
        Duration total = c.timeout != null ? c.timeout : (c.stream ? null : cfg.timeout);
        Duration headersBound = total != null ? total : cfg.timeout;
        HttpRequest req = rb.timeout(headersBound).build();
        String what = method + " " + uri;
        int attempt = 0;
        for (;;) {
            long started = System.nanoTime();
            int status;
            HttpHeaders headers;
            byte[] body = null;
            InputStream in = null;
            try {
                if (c.stream) {
                    HttpResponse<InputStream> r = await(http.sendAsync(req, HttpResponse.BodyHandlers.ofInputStream()), headersBound);
                    status = r.statusCode();
                    headers = r.headers();
                    in = r.body();
                } else {
                    HttpResponse<byte[]> r = await(http.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray()), total);
                    status = r.statusCode();
                    headers = r.headers();
                    body = r.body();
                }
            } catch (IOException e) {
                // Refused or unconnected: nothing was sent, any method may go again.
                boolean notSent = e instanceof ConnectException || e instanceof HttpConnectTimeoutException;
                boolean timedOut = e instanceof HttpTimeoutException;
                if ((notSent || IDEMPOTENT.contains(method)) && attempt < cfg.maxRetries) {
                    attempt = backoff(c.op, attempt, (timedOut ? "timeout: " : "transport: ") + e, null, null);
                    continue;
                }
                if (timedOut) {
                    long ms = (System.nanoTime() - started) / 1_000_000;
                    throw new SandboxdTimeoutException(what + ": no answer within " + ms + " ms", e);
                }
                throw new TransportException(what + ": " + e, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new TransportException(what + ": interrupted", e);
            }
            boolean ok = status < 400 && (c.expect == null || c.expect.contains(status));
            if (ok) return new Response(status, headers, body, in);
            if (in != null) body = readAll(in, what);
            String ctype = headers.firstValue("Content-Type").orElse("");
            String text = new String(body, StandardCharsets.UTF_8);
            JsonNode parsed = null;
            if (ctype.startsWith("application/json") && body.length > 0) {
                try {
                    parsed = JSON.readTree(body);
                } catch (IOException e) {
                    parsed = null;
                }
            }
            Double ra = retryAfter(headers);
            String rid = headers.firstValue("X-Request-Id").orElse(null);
            if (shouldRetry(status, parsed) && attempt < cfg.maxRetries) {
                attempt = backoff(c.op, attempt, "HTTP " + status, ra, rid);
                continue;
            }
            throw ApiException.of(status, parsed, text, ra, rid);
        }
    }

    private static byte[] readAll(InputStream in, String what) {
        try (in) {
            return in.readAllBytes();
        } catch (IOException e) {
            throw new TransportException(what + ": " + e, e);
        }
    }

    /** The answer's JSON. */
    JsonNode tree(Call c) {
        byte[] b = send(c).body();
        try {
            return b.length == 0 ? JSON.nullNode() : JSON.readTree(b);
        } catch (IOException e) {
            throw new TransportException(c.op + ": the answer is not JSON: " + e.getMessage(), e);
        }
    }

    /** The answer's JSON as a T (a model record). */
    <T> T json(Call c, Class<T> type) {
        return convert(tree(c), type);
    }

    static <T> T convert(JsonNode node, Class<T> type) {
        try {
            return JSON.treeToValue(node, type);
        } catch (JsonProcessingException | IllegalArgumentException e) {
            throw new TransportException("unexpected " + type.getSimpleName() + ": " + e.getMessage(), e);
        }
    }

    /** The answer's bytes. */
    byte[] bytes(Call c) {
        return send(c).body();
    }

    /** An SSE answer as a stream of events (the caller closes it). */
    EventStream<SseEvent> events(Call c) {
        c.stream = true;
        Response r = send(c);
        String ctype = r.header("Content-Type");
        if (ctype == null || !ctype.startsWith("text/event-stream")) {
            // A route that answered in JSON instead (e.g. a pull already done).
            byte[] b = readAll(r.stream(), c.op);
            JsonNode data;
            try {
                data = b.length == 0 ? JSON.nullNode() : JSON.readTree(b);
            } catch (IOException e) {
                throw new TransportException(c.op + ": the answer is not JSON", e);
            }
            return new EventStream<>(EventStream.Source.of(List.of(new SseEvent("json", data))), ev -> ev, ev -> false);
        }
        return new EventStream<>(new SseSource(r.stream(), c.timeout), ev -> ev, ev -> false);
    }

    // ---- Server-Sent Events -------------------------------------------------------

    /** Reads events off an open SSE answer; a timeout, when given, bounds the whole stream. */
    static final class SseSource implements EventStream.Source {
        private final InputStream in;
        private final BufferedReader reader;
        private final ScheduledFuture<?> timer;
        private final Duration timeout;
        private volatile boolean timedOut;
        private volatile boolean closed;

        SseSource(InputStream in, Duration timeout) {
            this.in = in;
            this.reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            this.timeout = timeout;
            this.timer = timeout == null ? null : WATCHDOG.schedule(() -> {
                timedOut = true;
                closeQuietly();
            }, timeout.toMillis(), TimeUnit.MILLISECONDS);
        }

        /** The next event, or null at the end of the stream. */
        public SseEvent next() {
            String event = null;
            List<String> data = new ArrayList<>();
            for (;;) {
                String line;
                try {
                    line = closed ? null : reader.readLine();
                } catch (IOException e) {
                    if (timedOut) {
                        throw new SandboxdTimeoutException("stream cut by its timeout of "
                            + timeout.toMillis() + " ms", e);
                    }
                    if (closed) return null;
                    throw new TransportException("stream broken: " + e, e);
                }
                if (line == null) {
                    if (timedOut) {
                        throw new SandboxdTimeoutException("stream cut by its timeout of "
                            + timeout.toMillis() + " ms", null);
                    }
                    return null;
                }
                if (line.isEmpty()) {
                    if (event != null || !data.isEmpty()) {
                        String payload = String.join("\n", data);
                        try {
                            return new SseEvent(event != null ? event : "message",
                                payload.isEmpty() ? JSON.nullNode() : JSON.readTree(payload));
                        } catch (IOException e) {
                            throw new TransportException("stream: an event's data is not JSON: " + payload, e);
                        }
                    }
                } else if (line.startsWith(":")) {
                    continue; // keep-alive comment
                } else if (line.startsWith("event:")) {
                    event = line.substring(6).stripLeading();
                } else if (line.startsWith("data:")) {
                    data.add(line.substring(line.startsWith("data: ") ? 6 : 5));
                }
            }
        }

        private void closeQuietly() {
            closed = true;
            try {
                in.close();
            } catch (IOException e) {
                // already closed
            }
        }

        @Override
        public void close() {
            if (timer != null) timer.cancel(false);
            closeQuietly();
        }
    }

    static ObjectNode object() {
        return JSON.createObjectNode();
    }

    /** Any value as JSON (a JsonNode as is; null is JSON null). */
    static JsonNode tree(Object value) {
        if (value instanceof JsonNode) return (JsonNode) value;
        JsonNode n = JSON.valueToTree(value);
        return n == null ? JSON.nullNode() : n;
    }

    /** Sets key to value (a String, number, boolean, List, Map or JsonNode); null leaves it out. */
    static ObjectNode put(ObjectNode o, String key, Object value) {
        if (value != null) o.set(key, JSON.valueToTree(value));
        return o;
    }
}
