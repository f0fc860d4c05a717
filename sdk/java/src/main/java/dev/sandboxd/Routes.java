// Routes.java — every HTTP operation this SDK calls, by the operationId of
// docs/api/openapi.yaml.  Every request is built from this table, and
// tests/sdk/check_sdk_contract.py checks it (through ContractDump) against
// the OpenAPI document.
package dev.sandboxd;

import java.util.List;
import java.util.Map;

/** The operations of the API this SDK calls, and the query parameters it sends. */
public final class Routes {
    private Routes() {
    }

    /** One operation: its method and path template ({@code {id}}; {@code {ref*}} keeps its slashes). */
    public record Route(String method, String path) {
    }

    /** operationId → route. */
    public static final Map<String, Route> ROUTES = Map.ofEntries(
        Map.entry("healthz", new Route("GET", "/healthz")),
        Map.entry("readyz", new Route("GET", "/readyz")),
        Map.entry("listProfiles", new Route("GET", "/v1/sandbox/profiles")),
        Map.entry("createExecution", new Route("POST", "/v1/sandbox/executions")),
        Map.entry("listExecutions", new Route("GET", "/v1/sandbox/executions")),
        Map.entry("getExecution", new Route("GET", "/v1/sandbox/executions/{id}")),
        Map.entry("cancelExecution", new Route("POST", "/v1/sandbox/executions/{id}/cancel")),
        Map.entry("getExecutionFile", new Route("GET", "/v1/sandbox/executions/{id}/files")),
        Map.entry("createSession", new Route("POST", "/v1/sandbox/sessions")),
        Map.entry("listSessions", new Route("GET", "/v1/sandbox/sessions")),
        Map.entry("getSession", new Route("GET", "/v1/sandbox/sessions/{id}")),
        Map.entry("updateSession", new Route("PATCH", "/v1/sandbox/sessions/{id}")),
        Map.entry("deleteSession", new Route("DELETE", "/v1/sandbox/sessions/{id}")),
        Map.entry("execInSession", new Route("POST", "/v1/sandbox/sessions/{id}/exec")),
        Map.entry("listProcesses", new Route("GET", "/v1/sandbox/sessions/{id}/processes")),
        Map.entry("getProcess", new Route("GET", "/v1/sandbox/sessions/{id}/processes/{pid}")),
        Map.entry("getProcessOutput", new Route("GET", "/v1/sandbox/sessions/{id}/processes/{pid}/output")),
        Map.entry("writeProcessStdin", new Route("POST", "/v1/sandbox/sessions/{id}/processes/{pid}/stdin")),
        Map.entry("signalProcess", new Route("POST", "/v1/sandbox/sessions/{id}/processes/{pid}/signal")),
        Map.entry("resizeProcessTerminal", new Route("POST", "/v1/sandbox/sessions/{id}/processes/{pid}/resize")),
        Map.entry("writeSessionFile", new Route("PUT", "/v1/sandbox/sessions/{id}/files")),
        Map.entry("readSessionFile", new Route("GET", "/v1/sandbox/sessions/{id}/files")),
        Map.entry("deleteSessionFile", new Route("DELETE", "/v1/sandbox/sessions/{id}/files")),
        Map.entry("makeSessionDirectory", new Route("POST", "/v1/sandbox/sessions/{id}/files/mkdir")),
        Map.entry("moveSessionFile", new Route("POST", "/v1/sandbox/sessions/{id}/files/move")),
        Map.entry("getSessionArchive", new Route("GET", "/v1/sandbox/sessions/{id}/archive")),
        Map.entry("putSessionArchive", new Route("PUT", "/v1/sandbox/sessions/{id}/archive")),
        Map.entry("watchSessionFiles", new Route("GET", "/v1/sandbox/sessions/{id}/watch")),
        Map.entry("createContext", new Route("POST", "/v1/sandbox/sessions/{id}/contexts")),
        Map.entry("listContexts", new Route("GET", "/v1/sandbox/sessions/{id}/contexts")),
        Map.entry("getContext", new Route("GET", "/v1/sandbox/sessions/{id}/contexts/{cid}")),
        Map.entry("deleteContext", new Route("DELETE", "/v1/sandbox/sessions/{id}/contexts/{cid}")),
        Map.entry("runInContext", new Route("POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/run")),
        Map.entry("restartContext", new Route("POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/restart")),
        Map.entry("listImages", new Route("GET", "/v1/sandbox/images")),
        Map.entry("pullImage", new Route("POST", "/v1/sandbox/images/pull")),
        Map.entry("collectImageGarbage", new Route("POST", "/v1/sandbox/images/gc")),
        Map.entry("deleteImage", new Route("DELETE", "/v1/sandbox/images/{ref*}")),
        Map.entry("listContracts", new Route("GET", "/v1/contracts")),
        Map.entry("getContract", new Route("GET", "/v1/contracts/{name}")),
        Map.entry("validateContract", new Route("POST", "/v1/contracts/{name}/validate")),
        Map.entry("applyManifests", new Route("POST", "/v1/manifests/apply")),
        Map.entry("listTools", new Route("GET", "/v1/tools")),
        Map.entry("getTool", new Route("GET", "/v1/tools/{name}")),
        Map.entry("deleteTool", new Route("DELETE", "/v1/tools/{name}")),
        Map.entry("invokeTool", new Route("POST", "/v1/tools/{name}/invoke")),
        Map.entry("getUsage", new Route("GET", "/v1/sandbox/usage")),
        Map.entry("listAuditEvents", new Route("GET", "/v1/audit")),
        Map.entry("verifyAudit", new Route("GET", "/v1/audit/verify")));

    /** operationId → the query parameters the SDK may send. */
    public static final Map<String, List<String>> QUERY = Map.ofEntries(
        Map.entry("listExecutions", List.of("limit", "cursor", "status")),
        Map.entry("getExecution", List.of("wait_s")),
        Map.entry("getExecutionFile", List.of("path")),
        Map.entry("listSessions", List.of("limit", "cursor", "status")),
        Map.entry("getProcessOutput", List.of("offset", "stdout_offset", "stderr_offset")),
        Map.entry("writeProcessStdin", List.of("eof")),
        Map.entry("writeSessionFile", List.of("path")),
        Map.entry("readSessionFile", List.of("path", "list", "recursive", "max_depth", "stat")),
        Map.entry("deleteSessionFile", List.of("path")),
        Map.entry("makeSessionDirectory", List.of("path", "parents", "mode")),
        Map.entry("getSessionArchive", List.of("path", "max_entries", "max_bytes")),
        Map.entry("putSessionArchive", List.of("path", "max_entries", "max_bytes")),
        Map.entry("watchSessionFiles", List.of("path", "recursive")),
        Map.entry("applyManifests", List.of("dry_run")),
        Map.entry("listTools", List.of("limit", "cursor")),
        Map.entry("getUsage", List.of("group_by", "from", "to")),
        Map.entry("listAuditEvents", List.of("tenant", "action", "after", "limit")));
}
