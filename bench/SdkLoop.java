// SdkLoop.java — the Java SDK's overhead (bench/sdkbench.py): like
// bench/sdkloop.py, through dev.sandboxd (sdk/java's jar) or as the same
// requests written by hand with java.net.http.HttpClient (one client,
// HTTP/1.1 keep-alive, JSON by Jackson as the SDK's own); one duration per
// line in µs.  Compiled by sdkbench.py against the jar sdk/java/build.sh makes.
// Usage: java SdkLoop URL KEY PROFILE {exec|execute} {sdk|raw} N W

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandboxd.ExecutionOptions;
import dev.sandboxd.SandboxSession;
import dev.sandboxd.SandboxdClient;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;

public final class SdkLoop {
    interface Op {
        void run() throws Exception;
    }

    private static final List<String> TRUE = List.of("true");
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] a) throws Exception {
        if (a.length != 7) {
            System.err.println("usage: SdkLoop URL KEY PROFILE {exec|execute} {sdk|raw} N W");
            System.exit(2);
        }
        String url = a[0], key = a[1], profile = a[2], what = a[3];
        int n = Integer.parseInt(a[5]), w = Integer.parseInt(a[6]);
        Op exec, execute, done;
        if (a[4].equals("sdk")) {
            SandboxdClient c = SandboxdClient.builder().baseUrl(url).apiKey(key).build();
            SandboxSession s = c.sandbox().sessions().create(profile);
            exec = () -> s.exec(TRUE);
            execute = () -> c.sandbox().execute(null, TRUE, new ExecutionOptions().profile(profile));
            done = s::delete;
        } else {
            Raw r = new Raw(url, key);
            String sid = r.call("POST", "/v1/sandbox/sessions", Map.of("profile", profile))
                .get("id").asText();
            exec = () -> r.call("POST", "/v1/sandbox/sessions/" + sid + "/exec", Map.of("command", TRUE));
            execute = () -> {
                String id = r.call("POST", "/v1/sandbox/executions",
                    Map.of("profile", profile, "command", TRUE)).get("id").asText();
                while (Set.of("queued", "running").contains(r.call("GET",
                    "/v1/sandbox/executions/" + id + "?wait_s=30", null).get("status").asText())) {
                    // long-poll again
                }
            };
            done = () -> r.call("DELETE", "/v1/sandbox/sessions/" + sid, null);
        }
        Op fn = what.equals("exec") ? exec : execute;
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < w + n; i++) {
            long t0 = System.nanoTime();
            fn.run();
            if (i >= w) out.append(String.format("%.1f%n", (System.nanoTime() - t0) / 1000.0));
        }
        done.run();
        System.out.print(out);
    }

    /** The hand-written side: one HttpClient, the requests the SDK sends. */
    static final class Raw {
        final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        final String url, auth;

        Raw(String url, String key) {
            this.url = url;
            this.auth = "Bearer " + key;
        }

        JsonNode call(String method, String path, Object body) throws Exception {
            HttpRequest req = HttpRequest.newBuilder(URI.create(url + path))
                .header("Authorization", auth).header("Content-Type", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)))
                .build();
            HttpResponse<byte[]> r = http.send(req, HttpResponse.BodyHandlers.ofByteArray());
            if (r.statusCode() >= 300) {
                String text = new String(r.body(), StandardCharsets.UTF_8);
                throw new IllegalStateException(method + " " + path + ": " + r.statusCode() + " "
                    + text.substring(0, Math.min(200, text.length())));
            }
            return r.body().length == 0 ? null : JSON.readTree(r.body());
        }
    }
}
