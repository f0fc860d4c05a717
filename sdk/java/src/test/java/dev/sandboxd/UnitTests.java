// UnitTests.java — the Java SDK's unit tests, without a daemon: a scripted
// server on 127.0.0.1 (FakeServer) answers.  A plain main-based runner (no
// test framework to install): `java -cp sandboxd-sdk.jar:test-classes
// dev.sandboxd.UnitTests`, ending with "N passed, N failed".
package dev.sandboxd;

import static dev.sandboxd.Check.check;
import static dev.sandboxd.Check.eq;
import static dev.sandboxd.Check.expect;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.Check.Body;
import dev.sandboxd.FakeServer.Reply;
import dev.sandboxd.model.CapturedOutput;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.ContractValidation;
import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ManifestApplyResult;
import dev.sandboxd.model.Tool;
import dev.sandboxd.model.ToolInvoked;
import dev.sandboxd.model.ToolManifest;
import dev.sandboxd.model.Violation;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class UnitTests {
    private static final Map<String, Body> TESTS = new LinkedHashMap<>();

    static void test(String name, Body body) {
        TESTS.put(name, body);
    }

    /** A client of srv with fast backoff and the environment given (nothing read from the real one). */
    static SandboxdClient.Builder client(FakeServer srv, Map<String, String> env) {
        return SandboxdClient.builder().baseUrl(srv.url()).apiKey("sbx_k1_test")
            .backoff(Duration.ofMillis(10), Duration.ofMillis(40)).env(env::get);
    }

    static SandboxdClient client(FakeServer srv) {
        return client(srv, Map.of()).build();
    }

    static final String EXEC = "{\"id\":\"exe_1\",\"status\":\"succeeded\",\"profile\":\"container\",\"exit_code\":0,"
        + "\"signal\":null,\"stdout\":\"AAE=\",\"stdout_encoding\":\"base64\",\"stderr\":\"\",\"files\":[],"
        + "\"an_unknown_field\":1}";
    static final String PROFILES = "{\"profiles\":[],\"default\":\"container\"}";
    static final String TOOL = "{\"name\":\"add\",\"profile\":\"container\",\"image\":\"python:3.12-slim\","
        + "\"generation\":1,\"digest\":\"sha256:00\",\"created_at\":\"2026-01-01T00:00:00Z\","
        + "\"updated_at\":\"2026-01-01T00:00:00Z\",\"manifest\":{\"apiVersion\":\"sandboxd/v1\",\"kind\":\"Tool\","
        + "\"metadata\":{\"name\":\"add\"},\"spec\":{\"sandbox_profile\":\"container\",\"image\":\"python:3.12-slim\","
        + "\"command\":[\"python3\",\"add.py\"],\"limits\":{\"cpu\":0.5}}}}";

    static String violation(String path, Integer index) {
        return "{" + (index == null ? "" : "\"index\":" + index + ",") + "\"path\":\"" + path + "\",\"message\":\"bad "
            + path + "\",\"message_i18n\":{\"en\":\"bad " + path + "\",\"fr\":\"mauvais " + path + "\"}}";
    }

    static List<String> requests(FakeServer srv) {
        List<String> out = new ArrayList<>();
        for (FakeServer.Seen x : srv.seen) out.add(x.method() + " " + x.path() + (x.query() == null ? "" : "?" + x.query()));
        return out;
    }

    static {
        test("rate_limited is retried after Retry-After", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.error(429, "rate_limited", "{\"limit\":\"requests_per_second\"}").header("Retry-After", "1"),
                    Reply.json(200, PROFILES));
                List<RetryInfo> seen = new ArrayList<>();
                long t0 = System.nanoTime();
                eq("container", client(srv, Map.of()).onRetry(seen::add).build().profiles().defaultProfile());
                check(System.nanoTime() - t0 >= 1_000_000_000L, "slept Retry-After");
                eq(1, seen.size());
                eq(1.0, seen.get(0).retryAfter());
                eq("listProfiles", seen.get(0).operation());
                eq("req_header", seen.get(0).requestId());
                eq(2, srv.seen.size());
            }
        });
        test("a create refused by 429 or 503 is retried (a refusal stores nothing)", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.error(429, "quota_exceeded", "{}"), Reply.error(503, "runtime_unavailable", "{}"),
                    Reply.json(202, "{\"id\":\"exe_1\",\"status\":\"queued\",\"profile\":\"p\"}"));
                eq("exe_1", client(srv).sandbox().executions().create(new ExecutionOptions().command("true")).id());
                eq(3, srv.seen.size());
            }
        });
        test("a tenant quota and a 500 are not retried", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.error(429, "quota_exceeded", "{\"limit\":\"sessions\",\"value\":2}"),
                    Reply.error(500, "internal", "{}"));
                SandboxdClient c = client(srv);
                QuotaExceededException q = expect(QuotaExceededException.class,
                    () -> c.sandbox().sessions().create("container"));
                eq("sessions", q.details().path("limit").asText());
                expect(InternalException.class, () -> c.profiles());
                eq(2, srv.seen.size());
            }
        });
        test("503 is retried a bounded number of times", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.fallback(s -> Reply.error(503, "not_ready", "{}"));
                NotReadyException e = expect(NotReadyException.class,
                    () -> client(srv, Map.of()).maxRetries(2).build().profiles());
                eq(503, e.status());
                eq(3, srv.seen.size());
            }
        });
        test("a dropped POST is not sent again, a dropped GET is", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.dropped());
                SandboxdClient c = client(srv);
                expect(TransportException.class, () -> c.sandbox().executions().create(new ExecutionOptions()));
                eq(1, srv.seen.size());
                srv.reply(Reply.dropped(), Reply.json(200, PROFILES));
                c.profiles();
                eq(3, srv.seen.size());
            }
        });
        test("a refused connection is retried for any method", () -> {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            List<RetryInfo> seen = new ArrayList<>();
            SandboxdClient c = SandboxdClient.builder().baseUrl("http://127.0.0.1:" + port).maxRetries(2)
                .backoff(Duration.ofMillis(1), Duration.ofMillis(2)).onRetry(seen::add).env(k -> null).build();
            TransportException e = expect(TransportException.class,
                () -> c.sandbox().executions().create(new ExecutionOptions()));
            check(!(e instanceof SandboxdTimeoutException), e);
            eq(2, seen.size());
            check(seen.get(0).why().startsWith("transport: "), seen);
        });
        test("backoff grows with equal jitter; Retry-After is capped", () -> {
            Transport t = new Transport(SandboxdClient.builder().backoff(Duration.ofMillis(100), Duration.ofMillis(1000))
                .maxRetryAfter(Duration.ofSeconds(3)).env(k -> null));
            for (int a = 0; a < 8; a++) {
                long cap = Math.min(1000, 100L << a);
                long d = t.delay(a, null).toMillis();
                check(d >= cap / 2 && d <= cap, "attempt " + a + ": " + d);
            }
            long d = t.delay(0, 30.0).toMillis();
            check(d >= 3000 && d < 3100, d);
            check(Transport.shouldRetry(429, Transport.JSON.readTree("{\"error\":{\"code\":\"quota_exceeded\",\"details\":{}}}")), "queue full");
            check(!Transport.shouldRetry(429, Transport.JSON.readTree("{\"error\":{\"code\":\"quota_exceeded\",\"details\":{\"limit\":\"executions\"}}}")), "quota");
            check(Transport.shouldRetry(503, null), "bare 503");
            check(!Transport.shouldRetry(503, Transport.JSON.readTree("{\"error\":{\"code\":\"internal\"}}")), "503 internal");
            check(!Transport.shouldRetry(502, null), "502");
        });
        test("every code has its class, with message, i18n, request id and details", () -> {
            try (FakeServer srv = new FakeServer()) {
                SandboxdClient c = client(srv, Map.of()).maxRetries(0).build();
                for (Map.Entry<String, ApiException.Factory> e : ApiException.BY_CODE.entrySet()) {
                    srv.reply(Reply.error(400, e.getKey(), "{\"field\":\"limits.memory\"}"));
                    ApiException x = expect(ApiException.class, () -> c.sandbox().sessions().get("ses_1"));
                    String want = e.getValue().make(0, "", "", Map.of(), null, null, null, null).getClass().getName();
                    eq(want, x.getClass().getName());
                    eq(e.getKey(), x.code());
                    eq("msg " + e.getKey(), x.getMessage());
                    eq("msg fr " + e.getKey(), x.messageI18n().get("fr"));
                    eq("req_" + e.getKey(), x.requestId());
                    eq("limits.memory", x.field());
                    check(x.toString().contains("(request req_" + e.getKey() + ")"), x);
                }
                eq(13, ApiException.BY_CODE.size());
            }
        });
        test("a non-envelope error is an ApiException with the header's request id", () -> {
            try (FakeServer srv = new FakeServer()) {
                Reply r = new Reply();
                r.status = 502;
                r.headers.put("Content-Type", "text/plain");
                r.chunks.add("upstream gone");
                srv.reply(r);
                ApiException e = expect(ApiException.class, () -> client(srv).profiles());
                eq(ApiException.class, e.getClass());
                eq("http_502", e.code());
                eq("upstream gone", e.getMessage());
                eq("req_header", e.requestId());
            }
        });
        test("headers: key, language, user agent, traceparent sources, extra", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.fallback(s -> Reply.json(200, PROFILES));
                String envTp = "00-11111111111111111111111111111111-1111111111111111-01";
                String supTp = "00-22222222222222222222222222222222-2222222222222222-01";
                String scopeTp = "00-33333333333333333333333333333333-3333333333333333-01";
                SandboxdClient c = client(srv, Map.of("TRACEPARENT", envTp)).language("fr").header("X-Extra", "1").build();
                c.profiles();
                FakeServer.Seen s = srv.last();
                eq("Bearer sbx_k1_test", s.header("Authorization"));
                eq("fr", s.header("Accept-Language"));
                eq("sandboxd-java/" + SandboxdClient.VERSION, s.header("User-Agent"));
                eq("application/json", s.header("Accept"));
                eq("1", s.header("X-Extra"));
                eq(envTp, s.header("traceparent"));
                SandboxdClient withSup = c.toBuilder().traceparent(() -> supTp).build();
                withSup.profiles();
                eq(supTp, srv.last().header("traceparent"));
                try (TraceScope t = TraceScope.of(scopeTp)) {
                    withSup.profiles();
                }
                eq(scopeTp, srv.last().header("traceparent"));
                withSup.profiles();
                eq(supTp, srv.last().header("traceparent"));
                client(srv).profiles();
                eq(null, srv.last().header("traceparent"));
                eq(null, srv.last().header("Accept-Language"));
            }
        });
        test("SANDBOXD_URL and SANDBOXD_API_KEY are the defaults", () -> {
            try (FakeServer srv = new FakeServer()) {
                SandboxdClient c = SandboxdClient.builder()
                    .env(Map.of("SANDBOXD_URL", srv.url() + "/", "SANDBOXD_API_KEY", "sbx_k9_env")::get).build();
                eq(srv.url(), c.baseUrl());
                c.healthz();
                eq("Bearer sbx_k9_env", srv.last().header("Authorization"));
                eq(SandboxdClient.DEFAULT_URL, SandboxdClient.builder().env(k -> null).build().baseUrl());
                expect(IllegalArgumentException.class, () -> SandboxdClient.builder().baseUrl("ftp://x").build());
            }
        });
        test("paths and queries are encoded", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.fallback(s -> s.method().equals("DELETE") ? Reply.json(204, "") : Reply.json(200, EXEC));
                SandboxdClient c = client(srv);
                c.sandbox().executions().get("exe 1/x", 5.0);
                eq("/v1/sandbox/executions/exe%201%2Fx", srv.last().path());
                eq("wait_s=5", srv.last().query());
                c.images().delete("127.0.0.1:5000/tools/jq:1");
                eq("/v1/sandbox/images/127.0.0.1:5000/tools/jq:1", srv.last().path());
                srv.fallback(s -> Reply.json(200, "{\"entries\":[]}"));
                c.sandbox().sessions().session("ses_1").files().list("/work/a b&c", true, 2);
                eq("path=%2Fwork%2Fa%20b%26c&list=true&recursive=true&max_depth=2", srv.last().query());
            }
        });
        test("a client-side timeout", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.json(200, PROFILES).pause(3000));
                SandboxdClient c = client(srv, Map.of()).timeout(Duration.ofMillis(300)).maxRetries(0).build();
                long t0 = System.nanoTime();
                expect(SandboxdTimeoutException.class, () -> c.profiles());
                check(System.nanoTime() - t0 < 2_500_000_000L, "took too long");
            }
        });
        test("an exec stream: keep-alives, CRLF, base64 chunks, multi-line data, exit", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.sse(0, ": keep-alive\n\n",
                    "event: stdout\r\ndata: {\"data\":\"one\\n\",\"offset\":0}\r\n\r\n",
                    "event: stderr\ndata: {\"data_base64\":\"AAE=\",\n", "data: \"offset\":0}\n\n",
                    "event: unknown\ndata: {}\n\n",
                    "event: exit\ndata: {\"status\":\"succeeded\",\"exit_code\":0,\"stdout\":\"one\\n\"}\n\n"));
                List<StreamEvent> evs = new ArrayList<>();
                ExecResult r = client(srv).sandbox().sessions().session("ses_1").stream(List.of("true"), evs::add);
                eq(3, evs.size());
                eq("one\n", evs.get(0).text());
                check(evs.get(1).isStderr() && evs.get(1).bytes().length == 2 && evs.get(1).bytes()[1] == 1, evs);
                eq(0, r.exitCode());
                eq("text/event-stream", srv.last().header("Accept"));
                JsonNode body = Transport.JSON.readTree(srv.last().body());
                eq("true", body.get("command").get(0).asText());
            }
        });
        test("a stream past its timeout says so; a closed one stops quietly", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.sse(2000, "event: stdout\ndata: {\"data\":\"x\",\"offset\":0}\n\n"));
                Processes p = client(srv).sandbox().sessions().session("ses_1").processes();
                long t0 = System.nanoTime();
                expect(SandboxdTimeoutException.class, () -> p.waitFor(7, Duration.ofMillis(300)));
                check(System.nanoTime() - t0 < 1_800_000_000L, "took too long");
                srv.reply(Reply.sse(100, "event: ready\ndata: {}\n\n", "event: create\ndata: {\"type\":\"create\",\"path\":\"/w/a\"}\n\n",
                    "event: end\ndata: {\"reason\":\"x\"}\n\n"));
                EventStream<WatchEvent> w = client(srv).sandbox().sessions().session("ses_1").watch("/w", false);
                eq("ready", w.next().event());
                eq("/w/a", w.next().path());
                w.close();
                check(!w.hasNext(), "closed");
            }
        });
        test("execute long-polls until final", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.json(202, "{\"id\":\"exe_1\",\"status\":\"queued\",\"profile\":\"p\"}"),
                    Reply.json(200, "{\"id\":\"exe_1\",\"status\":\"running\"}"), Reply.json(200, EXEC));
                Execution ex = client(srv).sandbox().execute("python:3.12-slim", List.of("python", "-c", "1"),
                    new ExecutionOptions().profile("gvisor"));
                eq("succeeded", ex.status());
                check(ex.isFinal(), ex);
                eq(3, srv.seen.size());
                eq("wait_s=30", srv.seen.get(1).query());
                JsonNode body = Transport.JSON.readTree(srv.seen.get(0).body());
                eq("{\"profile\":\"gvisor\",\"image\":\"python:3.12-slim\",\"command\":[\"python\",\"-c\",\"1\"]}",
                    body.toString());
            }
        });
        test("bytes travel as base64; outputs decode; a patch sends its nulls", () -> {
            ExecutionOptions o = new ExecutionOptions().file("/work/a", "x").file("/work/b", new byte[] {0, 1})
                .env("A", "1").metadata(Map.of("k", "v")).limits(new LimitsRequest().memory("256Mi").timeoutS(5));
            eq("[{\"path\":\"/work/a\",\"content\":\"x\"},{\"path\":\"/work/b\",\"content\":\"AAE=\",\"encoding\":\"base64\"}]",
                o.toJson().get("files").toString());
            eq(5, o.timeoutS());
            eq("{\"network\":null,\"metadata\":null,\"ttl_s\":10}",
                new SessionPatch().network(null).metadata(null).ttlS(10).toJson().toString());
            Execution ex = Transport.convert(Transport.JSON.readTree(EXEC), Execution.class);
            eq(2, ex.stdoutBytes().length);
            eq("é", new String(CapturedOutput.decode("é", "utf-8"), StandardCharsets.UTF_8));
        });
    }

    static {
        test("contracts: list, get, validate", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.json(200, "{\"contracts\":[\"tool-manifest\"]}"),
                    Reply.json(200, "{\"type\":\"object\"}").header("Content-Type", "application/schema+json"),
                    Reply.json(200, "{\"valid\":false,\"violations\":[" + violation("/spec/command", null) + ","
                        + violation("", null) + "]}"));
                SandboxdClient c = client(srv);
                eq(List.of("tool-manifest"), c.contracts().list());
                eq("object", c.contracts().get("tool-manifest").path("type").asText());
                ContractValidation v = c.contracts().validate("tool-manifest", Map.of("kind", "Tool"));
                check(!v.valid(), v);
                eq("/spec/command", v.violations().get(0).path());
                eq("mauvais /spec/command", v.violations().get(0).messageI18n().get("fr"));
                eq(null, v.violations().get(0).index());
                eq(List.of("GET /v1/contracts", "GET /v1/contracts/tool-manifest",
                    "POST /v1/contracts/tool-manifest/validate"), requests(srv));
                eq("{\"kind\":\"Tool\"}", srv.last().text());
            }
        });
        test("apply one manifest or a list, dry run", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.json(200, "{\"dry_run\":true,\"results\":[{\"name\":\"add\",\"action\":\"created\",\"tool\":"
                        + TOOL + "}]}"),
                    Reply.json(200, "{\"dry_run\":false,\"results\":[{\"name\":\"add\",\"action\":\"unchanged\",\"tool\":"
                        + TOOL + "},{\"name\":\"b\",\"action\":\"updated\",\"tool\":{\"name\":\"b\",\"generation\":2}}]}"));
                SandboxdClient c = client(srv);
                ToolManifest m = ToolManifest.builder("add").profile("container").image("python:3.12-slim")
                    .command("python3", "add.py").inputSchema(Map.of("type", "object")).build();
                ManifestApplyResult r = c.tools().apply(m, true);
                check(r.dryRun(), r);
                eq("created", r.results().get(0).action());
                eq(1, r.results().get(0).tool().generation());
                eq("add.py", r.results().get(0).tool().manifest().spec().command().get(1));
                eq(0.5, r.results().get(0).tool().manifest().spec().limits().path("cpu").asDouble());
                r = c.tools().apply(List.of(m, ToolManifest.builder("b").profile("container").image("host")
                    .command("true").build()));
                eq("unchanged", r.results().get(0).action());
                eq(2, r.results().get(1).tool().generation());
                eq("dry_run=true", srv.seen.get(0).query());
                eq(Transport.JSON.readTree("{\"apiVersion\":\"sandboxd/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"add\"},"
                    + "\"spec\":{\"sandbox_profile\":\"container\",\"image\":\"python:3.12-slim\","
                    + "\"command\":[\"python3\",\"add.py\"],\"input_schema\":{\"type\":\"object\"}}}"),
                    Transport.JSON.readTree(srv.seen.get(0).body()));
                eq(null, srv.seen.get(1).query());
                JsonNode items = Transport.JSON.readTree(srv.seen.get(1).body()).get("items");
                eq(2, items.size());
                eq("b", items.get(1).path("metadata").path("name").asText());
            }
        });
        test("violations of an apply and of an input", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.error(400, "invalid_request", "{\"field\":\"body\",\"violations\":["
                        + violation("/spec/image", 0) + "," + violation("/metadata/name", 1) + "]}"),
                    Reply.error(400, "invalid_request", "{\"field\":\"input\",\"violations\":["
                        + violation("/input/a", null) + "]}"));
                SandboxdClient c = client(srv);
                InvalidRequestException e = expect(InvalidRequestException.class, () -> c.tools().apply(
                    List.of(ToolManifest.builder("a").build(), ToolManifest.builder("b").build())));
                List<Violation> vs = e.violations();
                eq(2, vs.size());
                eq(0, vs.get(0).index());
                eq("/metadata/name", vs.get(1).path());
                e = expect(InvalidRequestException.class, () -> c.tools().invoke("add", Map.of("a", "x")));
                eq("/input/a", e.violations().get(0).path());
                eq(null, e.violations().get(0).index());
                eq("bad /input/a", e.violations().get(0).message());
                eq(2, srv.seen.size());
                srv.reply(Reply.error(404, "not_found", "{}"));
                eq(List.of(), expect(NotFoundException.class, () -> c.tools().get("x")).violations());
            }
        });
        test("tools: list, iterate, get, delete", () -> {
            try (FakeServer srv = new FakeServer()) {
                srv.reply(Reply.json(200, "{\"tools\":[" + TOOL + "],\"next_cursor\":\"add\"}"),
                    Reply.json(200, "{\"tools\":[{\"name\":\"b\"}],\"next_cursor\":null}"), Reply.json(200, TOOL),
                    Reply.json(204, ""), Reply.error(404, "not_found", "{}"));
                SandboxdClient c = client(srv);
                List<String> names = new ArrayList<>();
                for (Tool x : c.tools().iterate()) names.add(x.name());
                eq(List.of("add", "b"), names);
                eq("container", c.tools().get("add").profile());
                c.tools().delete("add");
                expect(NotFoundException.class, () -> c.tools().get("add"));
                eq(List.of("GET /v1/tools?limit=200", "GET /v1/tools?limit=200&cursor=add", "GET /v1/tools/add",
                    "DELETE /v1/tools/add", "GET /v1/tools/add"), requests(srv));
            }
        });
        test("invoke and run", () -> {
            try (FakeServer srv = new FakeServer()) {
                String inv = "{\"id\":\"exe_1\",\"status\":\"queued\",\"profile\":\"container\",\"tool\":\"add\",\"generation\":3}";
                srv.reply(Reply.json(202, inv), Reply.json(202, inv), Reply.json(200, "{\"id\":\"exe_1\",\"status\":\"running\"}"),
                    Reply.json(200, "{\"id\":\"exe_1\",\"status\":\"succeeded\",\"exit_code\":0,\"stdout\":\"5\\n\","
                        + "\"metadata\":{\"tool\":\"add\"}}"));
                SandboxdClient c = client(srv);
                ToolInvoked got = c.tools().invoke("add", Map.of("a", 2), Map.of("run", "r1"));
                eq("exe_1", got.id());
                eq(3, got.generation());
                Execution ex = c.tools().run("add", null);
                eq("succeeded", ex.status());
                eq("5\n", ex.stdout());
                eq("add", ex.metadata().get("tool"));
                eq(List.of("POST /v1/tools/add/invoke", "POST /v1/tools/add/invoke",
                    "GET /v1/sandbox/executions/exe_1?wait_s=30", "GET /v1/sandbox/executions/exe_1?wait_s=30"),
                    requests(srv));
                eq("{\"input\":{\"a\":2},\"metadata\":{\"run\":\"r1\"}}", srv.seen.get(0).text());
                eq("{}", srv.seen.get(1).text());
                srv.reply(Reply.json(202, inv));
                srv.fallback(x -> Reply.json(200, "{\"id\":\"exe_1\",\"status\":\"running\"}").pause(50));
                expect(SandboxdTimeoutException.class, () -> c.tools().run("add", Map.of(), Duration.ofMillis(300)));
            }
        });
    }

    public static void main(String[] args) {
        int passed = 0;
        int failed = 0;
        for (Map.Entry<String, Body> t : TESTS.entrySet()) {
            if (args.length > 0 && !t.getKey().contains(args[0])) continue;
            long t0 = System.nanoTime();
            try {
                t.getValue().run();
                passed++;
                System.out.printf("ok   %s (%d ms)%n", t.getKey(), (System.nanoTime() - t0) / 1_000_000);
            } catch (Throwable e) {
                failed++;
                System.out.printf("FAIL %s: %s%n", t.getKey(), e);
                e.printStackTrace(System.out);
            }
        }
        System.out.printf("%d passed, %d failed%n", passed, failed);
        System.exit(failed == 0 ? 0 : 1);
    }
}
