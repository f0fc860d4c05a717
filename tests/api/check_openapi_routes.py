#!/usr/bin/python3
"""check_openapi_routes.py — docs/api/openapi.yaml agrees with the router.

Usage: check_openapi_routes.py SANDBOXD_BINARY OPENAPI_YAML

Checks, each failing with the list of what is wrong:
  * the set of (METHOD, path) in `paths:` equals `sandboxd routes` (the
    router's table), differences listed both ways;
  * every operation has `responses`, every 4xx answer is the error envelope
    (components/schemas/Error), so is every 5xx, unless marked
    `x-error-envelope: false` (the readiness report of /readyz, the
    JSON-RPC errors of /mcp);
  * every authenticated operation documents 401;
  * operationIds exist and are unique;
  * every {param} of a path is declared `in: path`, and nothing else is;
  * every $ref resolves; every component schema is valid JSON Schema
    2020-12; every example validates against its schema.
Then it proves the checks bite: mutated copies of the document (a route
dropped, a route added, a duplicate operationId, a 4xx without the
envelope) must each be rejected.
"""
import copy
import os
import subprocess
import sys
import warnings

import jsonschema
import yaml

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
ENVELOPE = "#/components/schemas/Error"
# The E2B-compatible surface answers in E2B's own shapes, not ours.
E2B_SHAPES = ("#/components/schemas/E2BError", "#/components/schemas/ConnectError")


def find_binary(given):
    """The daemon may live in src/daemon/ or at the build root."""
    given = os.path.abspath(given)
    build_root = os.path.dirname(os.path.dirname(os.path.dirname(given)))
    candidates = [given, os.path.join(build_root, "sandboxd"),
                  os.path.join(os.getcwd(), "sandboxd"),
                  os.path.join(os.getcwd(), "src", "daemon", "sandboxd")]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("check_openapi_routes: sandboxd binary not found (tried %s)" % ", ".join(candidates))


def router_routes(binary):
    out = subprocess.run([binary, "routes"], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    routes = set()
    for line in out.splitlines():
        if not line.strip():
            continue
        method, pattern = line.split(None, 1)
        routes.add((method.upper(), pattern.strip()))
    if not routes:
        sys.exit("check_openapi_routes: `%s routes` printed no route" % binary)
    return routes


def resolve(doc, ref):
    if not ref.startswith("#/"):
        raise KeyError("external $ref not allowed: %s" % ref)
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def deref(doc, node):
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 20:
        node = resolve(doc, node["$ref"])
        seen += 1
    return node


def operations(doc):
    for path, item in (doc.get("paths") or {}).items():
        for method in METHODS:
            if method in item:
                yield path, method, item, item[method]


def doc_routes(doc):
    return {(m.upper(), p) for p, m, _, _ in operations(doc)}


def check_routes(doc, routes):
    errs = []
    documented = doc_routes(doc)
    for m, p in sorted(routes - documented):
        errs.append("served by the router but missing from openapi.yaml: %s %s" % (m, p))
    for m, p in sorted(documented - routes):
        errs.append("in openapi.yaml but not served by the router: %s %s" % (m, p))
    return errs


def check_operation_ids(doc):
    errs, seen = [], {}
    for path, method, _, op in operations(doc):
        oid = op.get("operationId")
        where = "%s %s" % (method.upper(), path)
        if not oid:
            errs.append("%s has no operationId" % where)
        elif oid in seen:
            errs.append("operationId %r used by both %s and %s" % (oid, seen[oid], where))
        else:
            seen[oid] = where
    return errs


def response_is_envelope(doc, resp, path=""):
    content = (deref(doc, resp).get("content") or {})
    schema = (content.get("application/json") or {}).get("schema") or {}
    if path.startswith("/e2b/"):
        return schema.get("$ref") in E2B_SHAPES
    return schema.get("$ref") == ENVELOPE


def check_responses(doc):
    errs = []
    global_security = doc.get("security", [])
    for path, method, _, op in operations(doc):
        where = "%s %s" % (method.upper(), path)
        responses = op.get("responses") or {}
        if not responses:
            errs.append("%s has no responses" % where)
            continue
        if not any(str(code).startswith("2") for code in responses):
            errs.append("%s documents no 2xx answer" % where)
        for code, resp in responses.items():
            code = str(code)
            r = deref(doc, resp)
            if code.startswith("4") and r.get("x-error-envelope", True) and \
                    not response_is_envelope(doc, resp, path):
                errs.append("%s: %s does not reference the error envelope" % (where, code))
            if code.startswith("5") and r.get("x-error-envelope", True) and \
                    not response_is_envelope(doc, resp, path):
                errs.append("%s: %s does not reference the error envelope" % (where, code))
        security = op.get("security", global_security)
        if security and "401" not in {str(c) for c in responses}:
            errs.append("%s needs an API key but documents no 401" % where)
    return errs


def check_path_params(doc):
    errs = []
    for path, method, item, op in operations(doc):
        where = "%s %s" % (method.upper(), path)
        templated = {seg[1:-1] for seg in path.split("/") if seg.startswith("{") and seg.endswith("}")}
        declared = set()
        for p in (item.get("parameters") or []) + (op.get("parameters") or []):
            p = deref(doc, p)
            if p.get("in") == "path":
                declared.add(p["name"])
                if p.get("required") is not True:
                    errs.append("%s: path parameter %s must be required" % (where, p["name"]))
        for name in sorted(templated - declared):
            errs.append("%s: {%s} is not declared as a path parameter" % (where, name))
        for name in sorted(declared - templated):
            errs.append("%s: path parameter %s is not in the path" % (where, name))
    return errs


def walk(node, trail=""):
    if isinstance(node, dict):
        yield trail, node
        for k, v in node.items():
            yield from walk(v, trail + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s/%d" % (trail, i))


def check_refs(doc):
    errs = []
    for trail, node in walk(doc):
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolve(doc, ref)
            except (KeyError, IndexError, TypeError) as e:
                errs.append("%s: $ref %s does not resolve (%s)" % (trail, ref, e))
    return errs


def validator(doc, schema):
    with warnings.catch_warnings():  # RefResolver is deprecated in newer jsonschema
        warnings.simplefilter("ignore", DeprecationWarning)
        resolver = jsonschema.RefResolver(base_uri="", referrer=doc)
    return jsonschema.Draft202012Validator(schema, resolver=resolver)


def check_schemas(doc):
    errs = []
    for name, schema in ((doc.get("components") or {}).get("schemas") or {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            errs.append("components/schemas/%s is not valid JSON Schema: %s" % (name, e.message))
    # Examples next to a schema (media types, parameters) must validate.
    for trail, node in walk(doc.get("paths") or {}, "/paths"):
        schema = node.get("schema")
        if not isinstance(schema, dict):
            continue
        samples = []
        if "example" in node:
            samples.append(("example", node["example"]))
        for k, ex in (node.get("examples") or {}).items():
            ex = deref(doc, ex)
            if isinstance(ex, dict) and "value" in ex:
                samples.append(("examples/" + k, ex["value"]))
        for label, value in samples:
            for e in validator(doc, schema).iter_errors(value):
                errs.append("%s/%s does not match its schema: %s" % (trail, label, e.message))
    for name, resp in ((doc.get("components") or {}).get("responses") or {}).items():
        for mt, media in (resp.get("content") or {}).items():
            if "example" in media and "schema" in media:
                for e in validator(doc, media["schema"]).iter_errors(media["example"]):
                    errs.append("components/responses/%s example does not match: %s"
                                % (name, e.message))
    return errs


def check_all(doc, routes):
    errs = []
    if not str(doc.get("openapi", "")).startswith("3.1"):
        errs.append("openapi must be 3.1.x, not %r" % doc.get("openapi"))
    for check in (check_routes, check_operation_ids, check_responses, check_path_params,
                  check_refs, check_schemas):
        errs += check(doc, routes) if check is check_routes else check(doc)
    return errs


def mutants(doc, routes):
    """(what was broken, broken copy): each must make check_all fail."""
    some_path, some_method = sorted((p, m) for p, m, _, _ in operations(doc))[0]
    m1 = copy.deepcopy(doc)
    del m1["paths"][some_path][some_method]
    yield "a documented route removed", m1
    m2 = copy.deepcopy(doc)
    m2["paths"]["/v1/not-served"] = {"get": {"operationId": "notServed",
                                             "responses": {"200": {"description": "x"}}}}
    yield "an unserved route added", m2
    m3 = copy.deepcopy(doc)
    ops = [op for _, _, _, op in operations(m3)]
    ops[1]["operationId"] = ops[0]["operationId"]
    yield "a duplicated operationId", m3
    m4 = copy.deepcopy(doc)
    for _, _, _, op in operations(m4):
        if "401" in op.get("responses", {}):
            op["responses"]["401"] = {"description": "no envelope"}
            break
    yield "a 4xx answer without the envelope", m4


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    binary = find_binary(argv[1])
    with open(argv[2], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    routes = router_routes(binary)
    errs = check_all(doc, routes)
    if errs:
        print("openapi.yaml disagrees with the daemon (%d problem(s)):" % len(errs))
        for e in errs:
            print("  - " + e)
        return 1
    for what, broken in mutants(doc, routes):
        if not check_all(broken, routes):
            print("self-check failed: %s went unnoticed" % what)
            return 1
    print("openapi.yaml: %d routes, all served and documented; envelope, operationIds, "
          "parameters, refs, schemas and examples OK" % len(routes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
