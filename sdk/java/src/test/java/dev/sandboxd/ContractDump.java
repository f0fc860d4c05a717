// ContractDump.java — what tests/sdk/check_sdk_contract.py checks of the Java
// SDK against docs/api/openapi.yaml, printed as JSON: the route table, the
// query parameters, every model record's JSON fields (read from the built jar,
// as Jackson reads them), and the request bodies its public methods really
// send (recorded by a FakeServer, never written down twice).
package dev.sandboxd;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandboxd.FakeServer.Reply;
import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ToolManifest;
import java.lang.reflect.RecordComponent;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.jar.JarFile;

public final class ContractDump {
    private ContractDump() {
    }

    /** The operation whose route matches method and path, by the route table. */
    static String operation(String method, String path) {
        for (Map.Entry<String, Routes.Route> e : Routes.ROUTES.entrySet()) {
            String re = "^" + e.getValue().path().replaceAll("\\{[^}]+\\*\\}", ".+").replaceAll("\\{[^}]+\\}", "[^/]+") + "$";
            if (e.getValue().method().equals(method) && path.matches(re)) return e.getKey();
        }
        return "unknown " + method + " " + path;
    }

    static ObjectNode models() throws Exception {
        ObjectNode out = Transport.object();
        Path jar = Path.of(Execution.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        try (JarFile jf = new JarFile(jar.toFile())) {
            for (String name : jf.stream().map(e -> e.getName()).sorted().toList()) {
                if (!name.startsWith("dev/sandboxd/model/") || !name.endsWith(".class") || name.contains("$")) continue;
                Class<?> c = Class.forName(name.replace('/', '.').replaceAll("\\.class$", ""));
                if (!c.isRecord()) continue;
                ArrayNode fields = out.putArray(c.getSimpleName());
                for (RecordComponent rc : c.getRecordComponents()) {
                    JsonProperty p = c.getDeclaredField(rc.getName()).getAnnotation(JsonProperty.class);
                    fields.add(p != null ? p.value() : rc.getName());
                }
            }
        }
        return out;
    }

    /** Drives every public method that sends a JSON body. */
    static ArrayNode bodies() throws Exception {
        try (FakeServer srv = new FakeServer()) {
            String any = "{\"id\":\"exe_000000000000000000000000\",\"status\":\"succeeded\",\"pid\":7,\"ref\":\"r\","
                + "\"digest\":\"sha256:" + "0".repeat(64) + "\",\"executions\":[],\"sessions\":[],\"next_cursor\":null}";
            srv.fallback(s -> {
                String op = operation(s.method(), s.path());
                int status = switch (op) {
                    case "createExecution", "execInSession" -> s.text().contains("\"background\"") || op.equals("createExecution") ? 202 : 200;
                    case "invokeTool" -> 202;
                    case "createSession", "createContext" -> 201;
                    default -> 200;
                };
                return Reply.json(status, any);
            });
            SandboxdClient c = SandboxdClient.builder().baseUrl(srv.url()).apiKey("k").env(k -> null).build();
            c.sandbox().executions().create("python:3.12-slim", List.of("python", "-c", "1"), new ExecutionOptions()
                .profile("gvisor").file("/work/a", "x").file("/work/b", new byte[] {0, 1}).collect("/work/out/*")
                .stdin("in").env("A", "1").limits(new LimitsRequest().cpu("500m").memory("256Mi").timeoutS(30))
                .network(NetworkRequest.none()).metadata("k", "v"));
            c.sandbox().executions().create(new ExecutionOptions().language("python").code("print(1)"));
            c.sandbox().sessions().create(new SessionOptions().profile("container").image("host")
                .limits(new LimitsRequest().memory("128Mi")).network(NetworkRequest.allowlist("pypi.org"))
                .env(Map.of("A", "b")).metadata("a", "b").ttlS(60));
            String sid = "ses_" + "0".repeat(24);
            c.sandbox().sessions().update(sid, new SessionPatch().ttlS(10).metadata(null).network(null));
            SandboxSession s = c.sandbox().sessions().session(sid);
            s.exec(List.of("ls"), new ExecOptions().stdin("x").env("A", "1").cwd("/tmp").timeoutS(5));
            s.exec(new ExecOptions().language("bash").code("echo"));
            s.start(List.of("sleep", "1"), new ExecOptions().pty(80, 24));
            s.processes().signal(7, "TERM");
            s.processes().resize(7, 100, 30);
            s.files().move("/work/a", "/work/b", true);
            s.contexts().create("python");
            s.contexts().run("ctx_" + "0".repeat(24), "1+1", 3);
            c.images().pull("python:3.12-slim");
            c.contracts().validate("tool-manifest", Map.of("apiVersion", "sandboxd/v1", "kind", "Tool"));
            ToolManifest m = ToolManifest.builder("add-numbers").description("Adds a and b.").label("team", "tools").profile("container")
                .image("python:3.12-slim").command("python3", "-c", "print(1)")
                .inputSchema(Map.of("type", "object", "required", List.of("a")))
                .limits(new LimitsRequest().cpu("500m").timeoutS(30).toJson()).network(NetworkRequest.none().toJson())
                .collect("/work/out/*").timeoutS(30.0).build();
            c.tools().apply(m, true);
            c.tools().apply(List.of(m, ToolManifest.builder("other").profile("container").image("host")
                .language("python").entrypoint("main.py").build()));
            c.tools().invoke("add-numbers", Map.of("a", 2, "b", 3), Map.of("run", "r1"));
            c.tools().run("add-numbers", List.of(1, "x"));
            ArrayNode out = Transport.JSON.createArrayNode();
            for (FakeServer.Seen x : srv.seen) {
                boolean json = "application/json".equals(x.header("Content-Type"));
                JsonNode body = json ? Transport.JSON.readTree(x.body()) : null;
                out.addArray().add(operation(x.method(), x.path())).add(body);
            }
            return out;
        }
    }

    public static void main(String[] args) throws Exception {
        ObjectNode out = Transport.object();
        ObjectNode routes = out.putObject("routes");
        new TreeMap<>(Routes.ROUTES).forEach((op, r) -> routes.putArray(op).add(r.method()).add(r.path()));
        out.set("query", Transport.JSON.valueToTree(new TreeMap<>(Routes.QUERY)));
        out.set("models", models());
        out.set("bodies", bodies());
        System.out.println(Transport.JSON.writeValueAsString(out));
    }
}
