// SandboxdClient.java — the entry point: a builder-configured client and its
// resources (sandbox executions and sessions, profiles, images, contracts,
// tools, usage, audit).
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.ProfileList;
import dev.sandboxd.model.UsageReport;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The sandboxd client.  Thread-safe; build one and share it:
 * <pre>{@code
 * SandboxdClient client = SandboxdClient.builder().baseUrl("http://127.0.0.1:8080").apiKey(key).build();
 * Execution ex = client.sandbox().execute("python:3.12-slim", List.of("python", "-c", "print(1)"),
 *     new ExecutionOptions().profile("gvisor"));
 * }</pre>
 * {@code baseUrl} and {@code apiKey} default to {@code SANDBOXD_URL} and
 * {@code SANDBOXD_API_KEY}, then {@code http://127.0.0.1:8080}.
 */
public final class SandboxdClient {
    public static final String VERSION = "0.1.0";
    public static final String DEFAULT_URL = "http://127.0.0.1:8080";

    private final Builder cfg;
    private final Transport t;
    private final Sandbox sandbox;
    private final Images images;
    private final Contracts contracts;
    private final Tools tools;
    private final Audit audit;

    private SandboxdClient(Builder cfg) {
        this.cfg = cfg.copy();
        this.t = new Transport(this.cfg);
        this.sandbox = new Sandbox(t);
        this.images = new Images(t);
        this.contracts = new Contracts(t);
        this.tools = new Tools(t);
        this.audit = new Audit(t);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A client from SANDBOXD_URL / SANDBOXD_API_KEY and the defaults. */
    public static SandboxdClient fromEnv() {
        return builder().build();
    }

    /** A builder with this client's settings, to derive a client: {@code client.toBuilder().language("fr").build()}. */
    public Builder toBuilder() {
        return cfg.copy();
    }

    /** The daemon's URL in use. */
    public String baseUrl() {
        return t.baseUrl;
    }

    /** Executions and sessions. */
    public Sandbox sandbox() {
        return sandbox;
    }

    /** The host's image store. */
    public Images images() {
        return images;
    }

    /** The JSON Schema contracts (tool-manifest) and validation against them. */
    public Contracts contracts() {
        return contracts;
    }

    /** Tools applied from tool manifests, invoked as executions. */
    public Tools tools() {
        return tools;
    }

    /** The audit chain (admin keys). */
    public Audit audit() {
        return audit;
    }

    /** The profiles this key may use. */
    public ProfileList profiles() {
        return sandbox.profiles();
    }

    /** The tenant's usage, by profile. */
    public UsageReport usage() {
        return usage(null, null, null);
    }

    /** The tenant's usage grouped by "profile", "project" or "agent". */
    public UsageReport usage(String groupBy) {
        return usage(groupBy, null, null);
    }

    /** from/to: RFC 3339 times or Unix seconds; null for the defaults. */
    public UsageReport usage(String groupBy, String from, String to) {
        return t.json(new Transport.Call("getUsage").query("group_by", groupBy).query("from", from)
            .query("to", to), UsageReport.class);
    }

    /** {"status": "ok"} while the daemon lives. */
    public JsonNode healthz() {
        return t.tree(new Transport.Call("healthz"));
    }

    /** The readiness report (a 503 "not ready" report is returned, not thrown). */
    public JsonNode readyz() {
        try {
            return t.tree(new Transport.Call("readyz"));
        } catch (ApiException e) {
            if (e.status() == 503 && e.body() != null) {
                try {
                    JsonNode b = Transport.JSON.readTree(e.body());
                    if (b.has("checks")) return b;
                } catch (java.io.IOException ignored) {
                    // not a report
                }
            }
            throw e;
        }
    }

    /** The settings of a client; every one has a default. */
    public static final class Builder {
        String baseUrl;
        String apiKey;
        String language;
        Duration timeout = Duration.ofSeconds(60);
        int maxRetries = 4;
        Duration backoff = Duration.ofMillis(250);
        Duration maxBackoff = Duration.ofSeconds(8);
        Duration maxRetryAfter = Duration.ofSeconds(60);
        Supplier<String> traceparent;
        Consumer<RetryInfo> onRetry;
        Map<String, String> headers = new LinkedHashMap<>();
        String userAgent = "sandboxd-java/" + VERSION;
        HttpClient httpClient;
        Function<String, String> env = System::getenv;

        private Builder() {
        }

        Builder copy() {
            Builder b = new Builder();
            b.baseUrl = baseUrl;
            b.apiKey = apiKey;
            b.language = language;
            b.timeout = timeout;
            b.maxRetries = maxRetries;
            b.backoff = backoff;
            b.maxBackoff = maxBackoff;
            b.maxRetryAfter = maxRetryAfter;
            b.traceparent = traceparent;
            b.onRetry = onRetry;
            b.headers = new LinkedHashMap<>(headers);
            b.userAgent = userAgent;
            b.httpClient = httpClient;
            b.env = env;
            return b;
        }

        /** http(s)://host[:port]; default SANDBOXD_URL, then http://127.0.0.1:8080. */
        public Builder baseUrl(String baseUrl) {
            this.baseUrl = baseUrl;
            return this;
        }

        /** The API key (sbx_k…); default SANDBOXD_API_KEY. */
        public Builder apiKey(String apiKey) {
            this.apiKey = apiKey;
            return this;
        }

        /** Accept-Language of error messages ("fr", "en"); null: the daemon's default. */
        public Builder language(String language) {
            this.language = language;
            return this;
        }

        /** Bound on each plain request (default 60 s); calls that wait by design stretch it. */
        public Builder timeout(Duration timeout) {
            this.timeout = Objects.requireNonNull(timeout);
            return this;
        }

        /** Retries of 429/503 refusals and connection failures (default 4; 0 disables). */
        public Builder maxRetries(int maxRetries) {
            this.maxRetries = maxRetries;
            return this;
        }

        /** First backoff step (default 250 ms), doubled per attempt up to maxBackoff (default 8 s). */
        public Builder backoff(Duration first, Duration max) {
            this.backoff = Objects.requireNonNull(first);
            this.maxBackoff = Objects.requireNonNull(max);
            return this;
        }

        /** Longest Retry-After honoured (default 60 s). */
        public Builder maxRetryAfter(Duration max) {
            this.maxRetryAfter = Objects.requireNonNull(max);
            return this;
        }

        /** A W3C traceparent sent with every request (a TraceScope wins over it). */
        public Builder traceparent(String traceparent) {
            return traceparent(traceparent == null ? null : () -> traceparent);
        }

        /** Asked before each request for the caller's current traceparent (null: none). */
        public Builder traceparent(Supplier<String> traceparent) {
            this.traceparent = traceparent;
            return this;
        }

        /** Told before each retry's sleep. */
        public Builder onRetry(Consumer<RetryInfo> onRetry) {
            this.onRetry = onRetry;
            return this;
        }

        /** An extra header on every request. */
        public Builder header(String name, String value) {
            headers.put(name, value);
            return this;
        }

        public Builder userAgent(String userAgent) {
            this.userAgent = Objects.requireNonNull(userAgent);
            return this;
        }

        /** The java.net.http client to use (default: one of its own, HTTP/1.1). */
        public Builder httpClient(HttpClient httpClient) {
            this.httpClient = httpClient;
            return this;
        }

        /** Where SANDBOXD_URL, SANDBOXD_API_KEY and TRACEPARENT are read (tests). */
        Builder env(Function<String, String> env) {
            this.env = env;
            return this;
        }

        public SandboxdClient build() {
            return new SandboxdClient(this);
        }
    }
}
