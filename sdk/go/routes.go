package sandboxd

// route is one HTTP operation of docs/api/openapi.yaml, by its operationId.
type route struct {
	method string
	path   string
}

// routes is every operation this SDK calls.  Every request is built from
// this table, and tests/sdk/check_sdk_contract.py checks it against the
// OpenAPI document (one entry a line: it parses this file).
var routes = map[string]route{
	"healthz":               {"GET", "/healthz"},
	"readyz":                {"GET", "/readyz"},
	"listProfiles":          {"GET", "/v1/sandbox/profiles"},
	"createExecution":       {"POST", "/v1/sandbox/executions"},
	"listExecutions":        {"GET", "/v1/sandbox/executions"},
	"getExecution":          {"GET", "/v1/sandbox/executions/{id}"},
	"cancelExecution":       {"POST", "/v1/sandbox/executions/{id}/cancel"},
	"getExecutionFile":      {"GET", "/v1/sandbox/executions/{id}/files"},
	"createSession":         {"POST", "/v1/sandbox/sessions"},
	"listSessions":          {"GET", "/v1/sandbox/sessions"},
	"getSession":            {"GET", "/v1/sandbox/sessions/{id}"},
	"updateSession":         {"PATCH", "/v1/sandbox/sessions/{id}"},
	"deleteSession":         {"DELETE", "/v1/sandbox/sessions/{id}"},
	"execInSession":         {"POST", "/v1/sandbox/sessions/{id}/exec"},
	"listProcesses":         {"GET", "/v1/sandbox/sessions/{id}/processes"},
	"getProcess":            {"GET", "/v1/sandbox/sessions/{id}/processes/{pid}"},
	"getProcessOutput":      {"GET", "/v1/sandbox/sessions/{id}/processes/{pid}/output"},
	"writeProcessStdin":     {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/stdin"},
	"signalProcess":         {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/signal"},
	"resizeProcessTerminal": {"POST", "/v1/sandbox/sessions/{id}/processes/{pid}/resize"},
	"writeSessionFile":      {"PUT", "/v1/sandbox/sessions/{id}/files"},
	"readSessionFile":       {"GET", "/v1/sandbox/sessions/{id}/files"},
	"deleteSessionFile":     {"DELETE", "/v1/sandbox/sessions/{id}/files"},
	"makeSessionDirectory":  {"POST", "/v1/sandbox/sessions/{id}/files/mkdir"},
	"moveSessionFile":       {"POST", "/v1/sandbox/sessions/{id}/files/move"},
	"getSessionArchive":     {"GET", "/v1/sandbox/sessions/{id}/archive"},
	"putSessionArchive":     {"PUT", "/v1/sandbox/sessions/{id}/archive"},
	"watchSessionFiles":     {"GET", "/v1/sandbox/sessions/{id}/watch"},
	"createContext":         {"POST", "/v1/sandbox/sessions/{id}/contexts"},
	"listContexts":          {"GET", "/v1/sandbox/sessions/{id}/contexts"},
	"getContext":            {"GET", "/v1/sandbox/sessions/{id}/contexts/{cid}"},
	"deleteContext":         {"DELETE", "/v1/sandbox/sessions/{id}/contexts/{cid}"},
	"runInContext":          {"POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/run"},
	"restartContext":        {"POST", "/v1/sandbox/sessions/{id}/contexts/{cid}/restart"},
	"listImages":            {"GET", "/v1/sandbox/images"},
	"pullImage":             {"POST", "/v1/sandbox/images/pull"},
	"collectImageGarbage":   {"POST", "/v1/sandbox/images/gc"},
	"deleteImage":           {"DELETE", "/v1/sandbox/images/{ref*}"},
	"listContracts":         {"GET", "/v1/contracts"},
	"getContract":           {"GET", "/v1/contracts/{name}"},
	"validateContract":      {"POST", "/v1/contracts/{name}/validate"},
	"applyManifests":        {"POST", "/v1/manifests/apply"},
	"listTools":             {"GET", "/v1/tools"},
	"getTool":               {"GET", "/v1/tools/{name}"},
	"deleteTool":            {"DELETE", "/v1/tools/{name}"},
	"invokeTool":            {"POST", "/v1/tools/{name}/invoke"},
	"getUsage":              {"GET", "/v1/sandbox/usage"},
	"listAuditEvents":       {"GET", "/v1/audit"},
	"verifyAudit":           {"GET", "/v1/audit/verify"},
}

// queryParams lists the query parameters the SDK may send, per operation.
// The transport refuses any other (so this table is what is really sent).
var queryParams = map[string][]string{
	"listExecutions":       {"limit", "cursor", "status"},
	"getExecution":         {"wait_s"},
	"getExecutionFile":     {"path"},
	"listSessions":         {"limit", "cursor", "status"},
	"getProcessOutput":     {"offset", "stdout_offset", "stderr_offset"},
	"writeProcessStdin":    {"eof"},
	"writeSessionFile":     {"path"},
	"readSessionFile":      {"path", "list", "recursive", "max_depth", "stat"},
	"deleteSessionFile":    {"path"},
	"makeSessionDirectory": {"path", "parents", "mode"},
	"getSessionArchive":    {"path", "max_entries", "max_bytes"},
	"putSessionArchive":    {"path", "max_entries", "max_bytes"},
	"watchSessionFiles":    {"path", "recursive"},
	"applyManifests":       {"dry_run"},
	"listTools":            {"limit", "cursor"},
	"getUsage":             {"group_by", "from", "to"},
	"listAuditEvents":      {"tenant", "action", "after", "limit"},
}
