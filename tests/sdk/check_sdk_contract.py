#!/usr/bin/python3
"""check_sdk_contract.py — the SDKs agree with docs/api/openapi.yaml.

Usage: check_sdk_contract.py [OPENAPI_YAML]

For the Python SDK (sdk/python/src/sandboxd), the TypeScript SDK
(sdk/typescript/src), the Go SDK (sdk/go) and the Java SDK (sdk/java, read
from its built jar: SANDBOXD_JAVA_SDK, default build/sdk-java, as `make
sdk-java` leaves it), each failing with the list of what is wrong:
  * every operation in the SDK's route table exists in the document under
    that operationId, with the same method and path;
  * every query parameter the SDK sends is declared by that operation;
  * every field of every typed model (Python dataclasses, TypeScript
    interfaces, Go structs' json tags, Java records) is a property of the schema of the
    same name, and every required property of that schema is a field of
    the model;
  * the request bodies the SDK really builds (recorded from its public
    methods, not written down twice) validate against each operation's
    requestBody schema;
  * for Go, whose recorded requests are whole (sdk/go/e2e/record: method,
    path, query, body), every request matches a route of its table, every
    query parameter sent is declared, and every route is exercised.
The Go SDK is run through tests/sdk/go.sh with SANDBOXD_BUILD (default
build/) holding its caches.
Then it proves the checks bite: a mutated document (a route moved, a
property renamed, a body field removed) must be rejected.
"""
import copy
import dataclasses
import json
import os
import re
import subprocess
import sys

import warnings

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python", "src"))

import sandboxd  # noqa: E402
from sandboxd import _http, models  # noqa: E402
from sandboxd.routes import QUERY, ROUTES  # noqa: E402

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
TS_SRC = os.path.join(ROOT, "sdk", "typescript", "src")
JAVA_SDK = os.environ.get("SANDBOXD_JAVA_SDK") or os.path.join(ROOT, "build", "sdk-java")
# Models whose schema lists no properties (described in prose) or that are
# SDK-side views, not API objects.
UNTYPED = {"ProcessOutput"}
# Models of objects the document declares inline, inside another schema:
# the path to them (properties by name; an array stands for its items).
NESTED = {
    "Violation": "Error/error/details/violations",
    "ToolApplied": "ManifestApplyResult/results",
}


def resolve(doc, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        cur = doc
        for part in ref[2:].split("/"):
            cur = cur[part.replace("~1", "/").replace("~0", "~")]
        node = cur
    return node


def operations(doc):
    out = {}
    for path, item in doc["paths"].items():
        for m in METHODS:
            if m in item:
                op = item[m]
                params = [resolve(doc, p) for p in item.get("parameters", []) + op.get("parameters", [])]
                out[op["operationId"]] = (m.upper(), path, op, params)
    return out


def schema_props(doc, name):
    """(properties, required) of a component schema, or of an inline one
    named by an operationId (its 200 answer's first array's items)."""
    schemas = doc["components"]["schemas"]
    if name in NESTED:
        top, *steps = NESTED[name].split("/")
        s = resolve(doc, schemas[top])
        for step in steps:
            s = resolve(doc, s["properties"][step])
            if s.get("type") == "array":
                s = resolve(doc, s["items"])
    elif name in schemas:
        s = resolve(doc, schemas[name])
    else:
        ops = operations(doc)
        if name not in ops:
            return None
        s = resolve(doc, ops[name][2]["responses"]["200"]["content"]["application/json"]["schema"])
        arr = next(v for v in s["properties"].values() if v.get("type") == "array")
        s = resolve(doc, arr["items"])
    props, req = dict(s.get("properties", {})), set(s.get("required", []))
    for sub in s.get("allOf", []):
        sub = resolve(doc, sub)
        props.update(sub.get("properties", {}))
        req |= set(sub.get("required", []))
    return props, req


def check_routes(doc, routes, query, who):
    errs = []
    ops = operations(doc)
    for op, (method, path) in routes.items():
        if op not in ops:
            errs.append(f"{who}: operation {op} is not in the document")
            continue
        m, p, _, params = ops[op]
        if (m, p) != (method, path):
            errs.append(f"{who}: {op} is {m} {p} in the document, the SDK calls {method} {path}")
        declared = {x["name"] for x in params if x.get("in") == "query"}
        for q in query.get(op, ()):
            if q not in declared:
                errs.append(f"{who}: {op} sends query parameter {q!r}, not declared "
                            f"(declared: {sorted(declared)})")
    return errs


def check_fields(doc, models_fields, who):
    errs = []
    for name, fields in sorted(models_fields.items()):
        if name in UNTYPED:
            continue
        sp = schema_props(doc, name)
        if sp is None:
            continue  # not an API schema (an SDK-side type)
        props, req = sp
        for f in sorted(fields - set(props)):
            errs.append(f"{who}: model {name} reads field {f!r}, not a property of its schema")
        for f in sorted(req - fields):
            errs.append(f"{who}: model {name} lacks the schema's required field {f!r}")
    return errs


# ---- Python ------------------------------------------------------------------

def python_models():
    out = {}
    for v in vars(models).values():
        if isinstance(v, type) and issubclass(v, models.Model) and v is not models.Model:
            out[v.__schema__] = {v.json_key(f.name) for f in dataclasses.fields(v)
                                 if f.name != "raw"}
    return out


class _Recorder(_http.Transport):
    """Records what the SDK would send instead of sending it."""

    def __init__(self):
        super().__init__("http://127.0.0.1:1", "sbx_k0_0")
        self.seen = []

    def request(self, op, params=None, *, query=None, json_body=None, body=None, **kw):
        self.seen.append((op, json_body))
        payload = {"id": "exe_" + "0" * 24, "status": "succeeded", "pid": 7, "ref": "r",
                   "digest": "sha256:" + "0" * 64, "executions": [], "sessions": [],
                   "next_cursor": None}
        return _http.Response(200, {}, json.dumps(payload).encode())


def python_bodies():
    c = sandboxd.Client(base_url="http://127.0.0.1:1", api_key="k")
    rec = _Recorder()
    c._t = rec
    for attr in ("sandbox", "images", "audit", "contracts", "tools"):
        getattr(c, attr)._t = rec
    c.sandbox.executions._t = rec
    c.sandbox.sessions._t = rec
    c.sandbox.executions.create("python:3.12-slim", ["python", "-c", "1"], profile="gvisor",
                                files={"/work/a": "x", "/work/b": b"\x00\x01"},
                                collect=["/work/out/*"], stdin="in", env={"A": "1"},
                                limits={"cpu": "500m", "memory": "256Mi", "timeout_s": 30},
                                network={"egress": "none"}, metadata={"k": "v"})
    c.sandbox.executions.create(None, language="python", code="print(1)")
    s = sandboxd.SandboxSession(rec, sandboxd.Session(id="ses_" + "0" * 24))
    c.sandbox.sessions.create("container", image="host", limits={"memory": "128Mi"},
                              network={"egress": "allowlist", "allow": ["pypi.org"]},
                              env={"A": "b"}, metadata={"a": "b"}, ttl_s=60)
    c.sandbox.sessions.update(s.id, ttl_s=10, metadata=None, network=None)
    s.exec(["ls"], stdin="x", env={"A": "1"}, cwd="/tmp", timeout_s=5)
    s.exec(language="bash", code="echo")
    s.start(["sleep", "1"], pty={"cols": 80, "rows": 24})
    s.processes.signal(7, "TERM")
    s.processes.resize(7, 100, 30)
    s.files.move("/work/a", "/work/b", overwrite=True)
    s.contexts.create("python")
    s.contexts.run("ctx_" + "0" * 24, "1+1", timeout_s=3)
    c.images.pull("python:3.12-slim")
    c.contracts.validate("tool-manifest", {"apiVersion": "sandboxd/v1", "kind": "Tool"})
    manifest = sandboxd.ToolManifest.build(
        "add-numbers", profile="container", image="python:3.12-slim",
        command=["python3", "-c", "print(1)"], labels={"team": "tools"}, description="Adds a and b.",
        input_schema={"type": "object", "required": ["a"]}, limits={"timeout_s": 30},
        network={"egress": "none"}, collect=["/work/out/*"], timeout_s=30)
    c.tools.apply(manifest, dry_run=True)
    c.tools.apply([manifest, {"apiVersion": "sandboxd/v1", "kind": "Tool",
                              "metadata": {"name": "other"},
                              "spec": {"sandbox_profile": "container", "image": "host",
                                       "language": "python", "entrypoint": "main.py"}}])
    c.tools.invoke("add-numbers", {"a": 2, "b": 3}, metadata={"run": "r1"})
    c.tools.run("add-numbers", [1, "x"])
    return rec.seen


# ---- TypeScript --------------------------------------------------------------

def route_table(path, split, key, opening, closing):
    """(routes, query) of a route table in source: one line a route,
    `KEY: OPENING"METHOD", "PATH"CLOSING,`, before the line holding
    `split`, then one line an operation's query parameters,
    `KEY: OPENING"name", …CLOSING,`."""
    rblock, qblock = open(path).read().split(split, 1)
    o, c = re.escape(opening), re.escape(closing)
    routes = {m[0]: (m[1], m[2]) for m in
              re.findall(rf'^\s+{key}: +{o}"(\w+)", "([^"]+)"{c},$', rblock, re.M)}
    query = {m[0]: tuple(re.findall(r'"([^"]+)"', m[1]))
             for m in re.findall(rf'^\s+{key}: +{o}([^{c}]*){c},$', qblock, re.M)}
    assert len(routes) >= 40, f"{path} parsed to {len(routes)} routes"
    return routes, query


def model_fields(path, decl, field, least):
    """{model: its fields} of the declarations (name, body) matched by decl."""
    out = {name: set(re.findall(field, body, re.M))
           for name, body in re.findall(decl, open(path).read(), re.M | re.S)}
    assert len(out) >= least, f"{path} parsed to {len(out)} models"
    return out


def ts_routes():
    return route_table(os.path.join(TS_SRC, "routes.ts"), "export const QUERY", r"(\w+)", "[", "]")


def ts_models():
    return model_fields(os.path.join(TS_SRC, "models.ts"),
                        r"^export interface (\w+)(?:<\w+>)? \{\n(.*?)^\}", r"^  (\w+)\??:", 25)


def ts_bodies():
    """Runs sdk/typescript/e2e/record_requests.mjs (the built package with
    a recording fetch)."""
    dist = os.path.join(ROOT, "sdk", "typescript", "dist", "index.js")
    if not os.path.exists(dist):
        raise SystemExit(f"{dist} missing: build it (cd sdk/typescript && tsc -p .)")
    p = subprocess.run(["node", os.path.join(ROOT, "sdk", "typescript", "e2e",
                                             "record_requests.mjs")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [(x["op"], x["json"]) for x in json.loads(p.stdout)]


# ---- Go ----------------------------------------------------------------------

GO_DIR = os.path.join(ROOT, "sdk", "go")


def go_routes():
    return route_table(os.path.join(GO_DIR, "routes.go"), "var queryParams", r'"(\w+)"', "{", "}")


def go_models():
    """The json tags of models.go's structs (a tag "-" is no field), with
    those of the structs they embed (a line that is a type name)."""
    raw = model_fields(os.path.join(GO_DIR, "models.go"), r"^type (\w+) struct \{\n(.*?)^\}",
                       r'json:"(\w+)|^\t([A-Z]\w*)$', 30)
    out = {name: {tag for tag, _ in fields if tag} for name, fields in raw.items()}
    for name, fields in raw.items():
        for _, embedded in fields:
            if embedded:
                out[name] |= out[embedded]
    return out


def template_rx(tmpl):
    """A path template ({id}, {ref*} for several segments) as a regex."""
    rx = re.sub(r"\\\{(\w+)\\\*\\\}", ".+", re.escape(tmpl))
    return re.compile(re.sub(r"\\\{(\w+)\\\}", "[^/]+", rx) + "$")


def go_requests(routes):
    """Runs sdk/go/e2e/record (the SDK's calls against a recording
    RoundTripper): [(op or None, method, path, query keys, json body)]."""
    build = os.environ.get("SANDBOXD_BUILD") or os.path.join(ROOT, "build")
    p = subprocess.run([os.path.join(HERE, "go.sh"), build, "run", "./e2e/record"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    pats = [(method, template_rx(tmpl), op) for op, (method, tmpl) in routes.items()]
    out = []
    for r in json.loads(p.stdout):
        op = next((o for m, rx, o in pats if m == r["method"] and rx.match(r["path"])), None)
        out.append((op, r["method"], r["path"], tuple(sorted(r["query"] or {})), r["json"]))
    return out


def check_requests(doc, reqs, who):
    """Each request matches its route in the document, with only declared
    query parameters."""
    errs = []
    ops = operations(doc)
    for op, method, path, qkeys, _ in reqs:
        if op is None or op not in ops or ops[op][0] != method or \
                not template_rx(ops[op][1]).match(path):
            errs.append(f"{who}: {method} {path} ({op}) is no operation of the document")
            continue
        declared = {x["name"] for x in ops[op][3] if x.get("in") == "query"}
        for q in qkeys:
            if q not in declared:
                errs.append(f"{who}: {op} sent query parameter {q!r}, not declared "
                            f"(declared: {sorted(declared)})")
    return errs


# ---- Java --------------------------------------------------------------------

def java_dump():
    """Runs dev.sandboxd.ContractDump (sdk/java/src/test) on the built jar:
    its routes, query parameters, model fields and recorded bodies."""
    jar = os.path.join(JAVA_SDK, "sandboxd-sdk.jar")
    if not os.path.exists(jar):
        raise SystemExit(f"{jar} missing: build it (make sdk-java)")
    # The jar's manifest puts Debian's Jackson jars on the class path.
    p = subprocess.run(["java", "-cp", f"{jar}:{os.path.join(JAVA_SDK, 'test-classes')}",
                        "dev.sandboxd.ContractDump"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(p.stdout)
    assert len(d["routes"]) >= 40 and len(d["models"]) >= 25, "ContractDump printed too little"
    d["models"] = {k: set(v) for k, v in d["models"].items()}
    d["bodies"] = [tuple(x) for x in d["bodies"]]
    return d


# ---- bodies ------------------------------------------------------------------

def check_bodies(doc, seen, who):
    errs = []
    ops = operations(doc)
    with warnings.catch_warnings():  # deprecated in newer jsonschema; Debian's has it
        warnings.simplefilter("ignore", DeprecationWarning)
        resolver = jsonschema.RefResolver.from_schema(doc)
    for op, body in seen:
        if body is None:
            continue
        rb = resolve(doc, ops[op][2].get("requestBody", {}))
        js = rb.get("content", {}).get("application/json", {}).get("schema")
        if js is None:
            errs.append(f"{who}: {op} sends a JSON body the document does not declare")
            continue
        v = jsonschema.Draft202012Validator(js, resolver=resolver)
        for e in v.iter_errors(body):
            errs.append(f"{who}: {op} body {json.dumps(body)[:200]}: {e.message}")
    return errs


def check_all(doc, py_seen, ts_seen, go, java):
    go_r, go_q, go_m, go_reqs = go
    errs = check_routes(doc, ROUTES, QUERY, "python")
    errs += check_fields(doc, python_models(), "python")
    errs += check_bodies(doc, py_seen, "python")
    tr, tq = ts_routes()
    errs += check_routes(doc, tr, tq, "typescript")
    errs += check_fields(doc, ts_models(), "typescript")
    errs += check_bodies(doc, ts_seen, "typescript")
    errs += check_routes(doc, go_r, go_q, "go")
    errs += check_fields(doc, go_m, "go")
    errs += check_requests(doc, go_reqs, "go")
    errs += check_bodies(doc, [(op, body) for op, _, _, _, body in go_reqs if op], "go")
    errs += check_routes(doc, {k: tuple(v) for k, v in java["routes"].items()}, java["query"], "java")
    errs += check_fields(doc, java["models"], "java")
    errs += check_bodies(doc, java["bodies"], "java")
    return errs


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "api", "openapi.yaml")
    with open(path) as f:
        doc = yaml.safe_load(f)
    py_seen, ts_seen = python_bodies(), ts_bodies()
    go_r, go_q = go_routes()
    go = (go_r, go_q, go_models(), go_requests(go_r))
    java = java_dump()
    used = {op for op, _ in py_seen} | {op for op, _ in ts_seen} | {op for op, _ in java["bodies"]}
    errs = check_all(doc, py_seen, ts_seen, go, java)
    errs += [f"go: route {op} is never called by sdk/go/e2e/record"
             for op in sorted(set(go_r) - {r[0] for r in go[3]})]
    if errs:
        print("\n".join(errs))
        print(f"FAIL: {len(errs)} disagreement(s) between the SDKs and {path}")
        return 1

    # The checks bite: each mutation must be caught.
    mutations = []
    m = copy.deepcopy(doc)
    m["paths"]["/v1/sandbox/execs/{id}"] = m["paths"].pop("/v1/sandbox/executions/{id}")
    mutations.append(("a route moved", m))
    m = copy.deepcopy(doc)
    props = m["components"]["schemas"]["Execution"]["properties"]
    props["exitcode"] = props.pop("exit_code")
    m["components"]["schemas"]["Execution"]["required"] = [
        "exitcode" if x == "exit_code" else x for x in m["components"]["schemas"]["Execution"]["required"]]
    mutations.append(("a response property renamed", m))
    m = copy.deepcopy(doc)
    del m["components"]["schemas"]["ExecutionCreateRequest"]["properties"]["collect"]
    mutations.append(("a request field removed", m))
    m = copy.deepcopy(doc)
    for p in m["paths"]["/v1/sandbox/sessions/{id}/archive"].get("parameters", []):
        if p.get("name") == "max_bytes":
            p["name"] = "max_size"
    mutations.append(("a query parameter renamed", m))
    m = copy.deepcopy(doc)
    props = m["components"]["schemas"]["Tool"]["properties"]
    props["gen"] = props.pop("generation")
    m["components"]["schemas"]["Tool"]["required"].remove("generation")
    mutations.append(("a property of a tool renamed", m))
    m = copy.deepcopy(doc)
    inv = m["components"]["schemas"]["ToolInvokeRequest"]["properties"]
    inv["arguments"] = inv.pop("input")
    mutations.append(("a tool's invoke field renamed", m))
    for what, mdoc in mutations:
        if not check_all(mdoc, py_seen, ts_seen, go, java):
            print(f"FAIL: the check missed {what}")
            return 1
    print(f"ok: {len(ROUTES)} operations, {len(python_models())} Python models, "
          f"{len(ts_models())} TypeScript types, {len(go[2])} Go structs, "
          f"{len(java['models'])} Java records, "
          f"{len(py_seen)}+{len(ts_seen)}+{len(java['bodies'])} recorded bodies "
          f"({len(used)} operations) and "
          f"{len(go[3])} recorded Go requests ({len(go_r)} routes) "
          f"agree with {os.path.relpath(path, ROOT)}; "
          f"{len(mutations)} mutations caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
