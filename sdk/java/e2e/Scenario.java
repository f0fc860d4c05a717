// Scenario.java — the SDK scenario, Java side (tests/sdk/test_sdk.py runs it
// against a real daemon with `java -cp <sandboxd-sdk.jar>:<test-classes>
// Scenario.java`, the assertions from dev.sandboxd.Check;
// tests/sdk/scenario.py is the same scenario in Python).  Environment:
// SANDBOXD_URL, SANDBOXD_API_KEY, SBX_ADMIN_KEY, SBX_RATE_KEY,
// SBX_REGISTRY_IMAGE, SBX_SEED_PROFILE.  Prints one line per step.
import static dev.sandboxd.Check.check;
import static dev.sandboxd.Check.expect;

import dev.sandboxd.ApiException;
import dev.sandboxd.BackgroundProcess;
import dev.sandboxd.ContextHandle;
import dev.sandboxd.EventStream;
import dev.sandboxd.ExecOptions;
import dev.sandboxd.ExecutionOptions;
import dev.sandboxd.ForbiddenException;
import dev.sandboxd.InvalidRequestException;
import dev.sandboxd.LimitsRequest;
import dev.sandboxd.NotFoundException;
import dev.sandboxd.RateLimitedException;
import dev.sandboxd.RetryInfo;
import dev.sandboxd.SandboxSession;
import dev.sandboxd.SandboxdClient;
import dev.sandboxd.SandboxdTimeoutException;
import dev.sandboxd.SessionOptions;
import dev.sandboxd.SessionPatch;
import dev.sandboxd.StreamEvent;
import dev.sandboxd.TraceScope;
import dev.sandboxd.WatchEvent;
import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.ContextRunResult;
import dev.sandboxd.model.ContractValidation;
import dev.sandboxd.model.ExecResult;
import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ExecutionCreated;
import dev.sandboxd.model.Image;
import dev.sandboxd.model.ManifestApplyResult;
import dev.sandboxd.model.ProfileList;
import dev.sandboxd.model.PulledImage;
import dev.sandboxd.model.Session;
import dev.sandboxd.model.Tool;
import dev.sandboxd.model.ToolManifest;
import dev.sandboxd.model.UsageReport;
import dev.sandboxd.model.Violation;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.stream.Collectors;

public class Scenario {
    static void step(String s) {
        System.out.println("[java] " + s);
        System.out.flush();
    }

    static String tar(String... args) throws Exception {
        List<String> argv = new ArrayList<>(List.of("tar"));
        argv.addAll(List.of(args));
        java.lang.Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        check(p.waitFor() == 0, "tar " + argv + ": " + out);
        return out;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> env = System.getenv();
        SandboxdClient admin = SandboxdClient.builder().apiKey(env.get("SBX_ADMIN_KEY")).build();
        SandboxdClient client = SandboxdClient.fromEnv(); // SANDBOXD_URL / SANDBOXD_API_KEY
        String regImage = env.get("SBX_REGISTRY_IMAGE");
        String seedProfile = env.getOrDefault("SBX_SEED_PROFILE", "gvisor");

        step("images: pull from the loopback registry with progress");
        PulledImage pulled = admin.images().pull(regImage, p -> { });
        check(pulled.digest().startsWith("sha256:"), pulled);
        List<String> refs = client.images().list().stream().map(Image::ref).collect(Collectors.toList());
        check(refs.contains("docker.io/library/python:3.12-slim"), refs);

        step("the seed's execute example, as written");
        String baseUrl = env.get("SANDBOXD_URL"), apiKey = env.get("SANDBOXD_API_KEY");
        SandboxdClient seed = SandboxdClient.builder().baseUrl(baseUrl).apiKey(apiKey).build();
        Execution ex = seed.sandbox().execute("python:3.12-slim", List.of("python", "-c", "print(1)"),
            new ExecutionOptions().profile(seedProfile));
        check(ex.status().equals("succeeded") && ex.exitCode() == 0 && ex.stdout().equals("1\n"), ex);

        step("execute on the pulled image with files in and collected files out");
        ex = client.sandbox().execute(regImage, List.of("python", "-c",
                "import os; os.makedirs('/work/out', exist_ok=True); "
                + "open('/work/out/r.txt','w').write(open('/work/in.txt').read().upper())"),
            new ExecutionOptions().profile("container").file("/work/in.txt", "hello sdk".getBytes(StandardCharsets.UTF_8))
                .collect("/work/out/*").metadata("project", "sdk"));
        check(ex.status().equals("succeeded"), ex);
        check(ex.files().size() == 1 && ex.files().get(0).path().equals("/work/out/r.txt"), ex.files());
        String got = new String(client.sandbox().executions().download(ex.id(), "/work/out/r.txt"),
            StandardCharsets.UTF_8);
        check(got.equals("HELLO SDK"), got);
        String exId = ex.id();
        check(client.sandbox().executions().list(null, 50, null).executions().stream()
            .anyMatch(e -> e.id().equals(exId)), "listed");

        step("a timeout: limits.timeout_s ends the run");
        ex = client.sandbox().execute(null, List.of("sleep", "30"),
            new ExecutionOptions().profile("container").limits(new LimitsRequest().timeoutS(1)));
        check(ex.status().equals("timeout") && "timeout".equals(ex.reason()), ex);

        step("cancel a running execution");
        ExecutionCreated created = client.sandbox().executions().create(null, List.of("sleep", "60"),
            new ExecutionOptions().profile("container"));
        client.sandbox().executions().cancel(created.id());
        Execution c = client.sandbox().executions().wait(created.id(), Duration.ofSeconds(60));
        check(c.status().equals("killed") && "cancelled".equals(c.reason()), c);

        step("a session: exec, files, archives, patch");
        String sid;
        try (SandboxSession s = client.sandbox().sessions().create(
                new SessionOptions().profile("container").metadata("agent", "sdk"))) {
            sid = s.id();
            check(s.status().equals("ready"), s.info());
            ExecResult r = s.exec(List.of("sh", "-c", "echo out; echo err >&2; exit 4"));
            check(r.status().equals("failed") && r.exitCode() == 4 && r.stdout().equals("out\n")
                && r.stderr().equals("err\n"), r);
            s.files().put("/work/a/hello.txt", "hi there");
            check(s.files().readText("/work/a/hello.txt").equals("hi there"), "get");
            check(s.files().list("/work/a").stream().map(e -> e.name()).collect(Collectors.toList())
                .equals(List.of("hello.txt")), "list");
            check(s.files().stat("/work/a/hello.txt").size() == 8, "stat");
            // archives: read one with the system tar, write one made by it
            Path dir = Files.createTempDirectory("sdk-java-");
            Files.write(dir.resolve("a.tar"), s.files().archive("/work/a"));
            check(tar("-tf", dir.resolve("a.tar").toString()).contains("hello.txt"), "archive");
            Files.createDirectories(dir.resolve("src/x"));
            Files.writeString(dir.resolve("src/x/y.txt"), "from a tar\n");
            tar("-cf", dir.resolve("b.tar").toString(), "-C", dir.resolve("src").toString(), "x");
            check(s.files().extract("/work/b", Files.readAllBytes(dir.resolve("b.tar"))).entries() >= 1, "extract");
            check(s.files().readText("/work/b/x/y.txt").equals("from a tar\n"), "extracted");
            s.files().delete("/work/a/hello.txt");
            expect(NotFoundException.class, () -> s.files().get("/work/a/hello.txt"));
            s.update(new SessionPatch().metadata(Map.of("agent", "sdk", "step", "2")));
            check(s.info().metadata().equals(Map.of("agent", "sdk", "step", "2")), s.info());
            boolean listed = false;
            for (Session x : client.sandbox().sessions().iterate(null)) listed |= x.id().equals(sid);
            check(listed, "session listed");

            step("streaming exec");
            List<StreamEvent> evs = new ArrayList<>();
            ExecResult sr = s.stream(List.of("sh", "-c", "echo one; echo two >&2; echo three"), evs::add);
            String out = evs.stream().filter(StreamEvent::isStdout).map(StreamEvent::text).collect(Collectors.joining());
            check(out.equals("one\nthree\n") && evs.get(evs.size() - 1).isExit() && sr.exitCode() == 0, evs);

            step("a background process: stdin, follow, signal");
            BackgroundProcess p = s.start(List.of("sh", "-c", "read x; echo got:$x; exit 3"));
            p.stdin("hi\n", true);
            ExecResult res = p.waitFor(Duration.ofSeconds(60));
            check(res.exitCode() == 3 && res.status().equals("failed"), res);
            check(p.output().stdout().equals("got:hi\n"), p.output());
            BackgroundProcess q = s.start(List.of("sleep", "60"));
            check(s.processes().list().stream().anyMatch(x -> x.pid() == q.pid() && x.status().equals("running")),
                "running");
            q.signal("TERM");
            check(Objects.equals(q.waitFor(Duration.ofSeconds(60)).signal(), 15), "signalled");

            step("a context keeps its state");
            ContextHandle ctx = s.contexts().create("python");
            ctx.run("x = 41");
            ContextRunResult rr = ctx.run("x + 1");
            check(rr.status().equals("succeeded") && "42".equals(rr.result()), rr);
            ctx.delete();

            step("watch a directory");
            s.files().mkdir("/work/w");
            try (EventStream<WatchEvent> w = s.watch("/work/w", false)) {
                WatchEvent first = w.next();
                check(first.event().equals("ready"), first);
                s.files().put("/work/w/new.txt", "x");
                WatchEvent ev = w.next();
                check(List.of("create", "modify").contains(ev.type()) && ev.path().endsWith("new.txt"), ev);
            }

            step("traceparent reaches the workload");
            String tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            try (TraceScope t = TraceScope.of(tp)) {
                r = s.exec(List.of("sh", "-c", "echo $TRACEPARENT"));
            }
            check(r.stdout().startsWith("00-4bf92f3577b34da6a3ce929d0e0e4736-"), r.stdout());

            step("a client-side timeout");
            SandboxdClient quick = client.toBuilder().timeout(Duration.ofSeconds(1)).maxRetries(0).build();
            expect(SandboxdTimeoutException.class, () -> quick.sandbox().sessions().session(sid)
                .exec(List.of("sleep", "5"), new ExecOptions().timeout(Duration.ofSeconds(1))));
        }
        check(client.sandbox().sessions().get(sid).status().equals("terminated"), "deleted");

        step("a 429 retried, honouring Retry-After");
        List<RetryInfo> retries = new ArrayList<>();
        SandboxdClient ratey = SandboxdClient.builder().apiKey(env.get("SBX_RATE_KEY")).onRetry(retries::add).build();
        for (int i = 0; i < 4; i++) ratey.profiles();
        check(!retries.isEmpty() && retries.stream().allMatch(x -> x.retryAfter() != null), retries);
        SandboxdClient noRetry = ratey.toBuilder().maxRetries(0).onRetry(null).build();
        RateLimitedException rl = expect(RateLimitedException.class, () -> {
            for (int i = 0; i < 4; i++) noRetry.profiles();
        });
        check(rl.status() == 429 && rl.retryAfter() != null
            && rl.details().path("limit").asText().equals("requests_per_second"), rl);

        step("a French error");
        SandboxdClient fr = client.toBuilder().language("fr").build();
        NotFoundException nf = expect(NotFoundException.class,
            () -> fr.sandbox().sessions().get("ses_000000000000000000000000"));
        check(nf.code().equals("not_found") && nf.getMessage().equals(nf.messageI18n().get("fr"))
            && !nf.messageI18n().get("fr").equals(nf.messageI18n().get("en")), nf);
        check(nf.requestId() != null && nf.requestId().startsWith("req_"), nf.requestId());
        InvalidRequestException ir = expect(InvalidRequestException.class, () -> fr.sandbox().sessions()
            .create(new SessionOptions().profile("container").limits(new LimitsRequest().memory("lots"))));
        check("limits.memory".equals(ir.field()) && ir.getMessage().equals(ir.messageI18n().get("fr")), ir);
        check(ir instanceof ApiException, "hierarchy");

        step("profiles, usage, audit");
        ProfileList pl = client.profiles();
        check(pl.get("container") != null && pl.get("container").available(), pl);
        UsageReport u = client.usage("project");
        check(u.groups().stream().anyMatch(g -> "sdk".equals(g.key()) && g.records() >= 1), u);
        var page = admin.audit().list(5);
        check(!page.events().isEmpty() && page.events().get(0).seq() >= 1, page);
        check(admin.audit().verify().ok(), "audit chain");
        expect(ForbiddenException.class, () -> client.audit().verify());

        tools(client);

        System.out.println("[java] scenario passed");
    }

    static void tools(SandboxdClient client) throws Exception {
        step("contracts: a bad tool manifest's violations");
        check(client.contracts().list().contains("tool-manifest"), "contracts");
        check(client.contracts().get("tool-manifest").path("properties").path("kind").path("const").asText()
            .equals("Tool"), "schema");
        Map<String, Object> bad = Map.of("apiVersion", "sandboxd/v1", "kind", "Tool",
            "metadata", Map.of("name", "Add_Numbers"), "spec", Map.of("sandbox_profile", "container", "command", "python3"));
        ContractValidation v = client.contracts().validate("tool-manifest", bad);
        List<String> paths = v.violations().stream().map(Violation::path).collect(Collectors.toList());
        check(!v.valid() && paths.contains("/metadata/name") && paths.contains("/spec/command"), v);
        check(v.violations().stream().allMatch(x -> !x.message().isEmpty() && x.messageI18n().get("fr") != null), v);

        step("tools: apply, apply again, list");
        String name = "add-numbers-java";
        ToolManifest m = ToolManifest.builder(name).description("Adds a and b.").label("sdk", "java").profile("container").image("python:3.12-slim")
            .command("python3", "-c", "import json,sys; d=json.load(sys.stdin); print(d['a']+d['b'])")
            .inputSchema(Map.of("type", "object", "required", List.of("a", "b"),
                "properties", Map.of("a", Map.of("type", "number"), "b", Map.of("type", "number"))))
            .build();
        ManifestApplyResult res = client.tools().apply(m, true);
        check(res.dryRun() && res.results().get(0).action().equals("created"), res);
        res = client.tools().apply(m);
        check(!res.dryRun() && res.results().size() == 1 && res.results().get(0).name().equals(name)
            && res.results().get(0).action().equals("created") && res.results().get(0).tool().generation() == 1, res);
        res = client.tools().apply(m);
        check(res.results().get(0).action().equals("unchanged") && res.results().get(0).tool().generation() == 1, res);
        ToolManifest badManifest = ToolManifest.builder("Add_Numbers").profile("container").command("python3").build();
        InvalidRequestException ir = expect(InvalidRequestException.class,
            () -> client.tools().apply(List.of(m, badManifest)));
        check(!ir.violations().isEmpty() && ir.violations().stream().allMatch(x -> Objects.equals(x.index(), 1))
            && ir.violations().stream().anyMatch(x -> x.path().equals("/metadata/name")), ir.violations());
        Tool found = null;
        for (Tool t : client.tools().iterate()) if (t.name().equals(name)) found = t;
        check(found != null && found.profile().equals("container"), found);
        JsonNode required = found.manifest().spec().inputSchema().path("required");
        check(required.size() == 2 && required.get(0).asText().equals("a")
            && "Adds a and b.".equals(found.manifest().metadata().description()), found);

        step("tools: run, a bad input, delete");
        Execution ex = client.tools().run(name, Map.of("a", 2, "b", 3), Duration.ofMinutes(5));
        check(ex.status().equals("succeeded") && ex.exitCode() == 0 && ex.stdout().equals("5\n")
            && name.equals(ex.metadata().get("tool")), ex);
        ir = expect(InvalidRequestException.class, () -> client.tools().invoke(name, Map.of("a", "x")));
        check(ir.code().equals("invalid_request") && !ir.violations().isEmpty()
            && ir.violations().stream().allMatch(x -> x.path().startsWith("/input")), ir.violations());
        client.tools().delete(name);
        expect(NotFoundException.class, () -> client.tools().get(name));
    }
}
