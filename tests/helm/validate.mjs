// validate.mjs OUT_DIR — checks what run.sh rendered from deploy/helm/sandboxd.
// For each value set OUT_DIR/<set>.yaml (+ <set>.values.json, <set>.notes.txt):
//   1. every document parses as YAML (duplicate keys are errors) and
//      validates against its Kubernetes OpenAPI schema (kubernetes-models,
//      pinned by package-lock.json): types, required fields, enums, formats;
//   2. lint, what `helm lint` and the API server would catch and the schema
//      cannot: metadata.name a DNS name, the app.kubernetes.io labels, a
//      workload's selector matching its own pod labels, no duplicate
//      (kind, name), every Secret a pod reads rendered in the same set or
//      named by the values as an existing Secret, Service/PDB/NetworkPolicy
//      selectors matching a rendered pod, probes naming a declared port;
//   3. the coalesced values validate against values.schema.json (ajv), as
//      Helm checks them before rendering;
//   4. what each value set is for (EXPECT below): the fleet env, the hook
//      annotations, the RuntimeClass, the control plane, the egress rules.
// A self-test first proves the checks reject broken objects.
import { readFileSync, readdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import Ajv from "ajv";

const here = dirname(fileURLToPath(import.meta.url));
const chartDir = join(here, "../../deploy/helm/sandboxd");
const out = process.argv[2];
if (!out) throw new Error("usage: node validate.mjs OUT_DIR");

const failures = [];
const fail = (where, msg) => failures.push(`${where}: ${msg}`);

// --- 1. schemas --------------------------------------------------------------
async function model(apiVersion, kind) {
  const path = apiVersion === "v1" ? "kubernetes-models/v1" : `kubernetes-models/${apiVersion}`;
  let mod;
  try {
    mod = await import(path);
  } catch {
    return null;
  }
  return mod[kind] ?? null;
}

async function schemaErrors(obj) {
  const M = await model(obj.apiVersion, obj.kind);
  if (!M) return [`no schema for ${obj.apiVersion} ${obj.kind}`];
  try {
    new M(obj).validate();
    return [];
  } catch (e) {
    return [String(e.message ?? e)];
  }
}

function parseDocs(text, where) {
  const objs = [];
  for (const doc of parseAllDocuments(text, { uniqueKeys: true })) {
    if (doc.errors.length) {
      fail(where, `YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const v = doc.toJS();
    if (v != null) objs.push(v);
  }
  return objs;
}

// --- 2. lint -------------------------------------------------------------------
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const REQUIRED_LABELS = [
  "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
  "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "helm.sh/chart",
];
const WORKLOADS = new Set(["DaemonSet", "Deployment", "Job", "StatefulSet"]);
const podSpec = (o) => o.spec?.template?.spec;
const podLabels = (o) => o.spec?.template?.metadata?.labels ?? {};
const matches = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);

function lint(objs, values, where) {
  const errs = [];
  const seen = new Set();
  const secrets = new Set(objs.filter((o) => o.kind === "Secret").map((o) => o.metadata.name));
  for (const n of [values.postgresql?.external?.existingSecret, values.fleet?.existingSecret]) {
    if (n) secrets.add(n); // the operator's own Secrets, named in the values
  }
  const pods = objs.filter((o) => WORKLOADS.has(o.kind));
  for (const o of objs) {
    const id = `${o.kind}/${o.metadata?.name}`;
    const name = o.metadata?.name;
    if (!name) { errs.push(`${o.kind} without metadata.name`); continue; }
    if (name.length > 63 || !DNS1123_SUBDOMAIN.test(name)) errs.push(`${id}: name is not a DNS-1123 label of ≤ 63`);
    if (seen.has(`${o.kind}/${name}`)) errs.push(`${id}: rendered twice`);
    seen.add(`${o.kind}/${name}`);
    for (const l of REQUIRED_LABELS) {
      if (!o.metadata.labels?.[l]) errs.push(`${id}: label ${l} missing`);
    }
    if (WORKLOADS.has(o.kind)) {
      const sel = o.spec.selector?.matchLabels;
      if (o.kind !== "Job" && (!sel || !matches(sel, podLabels(o))))
        errs.push(`${id}: selector does not match its pod template's labels`);
      for (const l of REQUIRED_LABELS) {
        if (!podLabels(o)[l]) errs.push(`${id}: pod label ${l} missing`);
      }
      const spec = podSpec(o);
      const refs = [];
      for (const v of spec.volumes ?? []) if (v.secret) refs.push(v.secret.secretName);
      for (const c of spec.containers) {
        for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef) refs.push(e.valueFrom.secretKeyRef.name);
        const ports = new Set((c.ports ?? []).map((p) => p.name));
        for (const p of ["readinessProbe", "livenessProbe", "startupProbe"]) {
          const port = c[p]?.httpGet?.port;
          if (typeof port === "string" && !ports.has(port)) errs.push(`${id}: ${p} names undeclared port ${port}`);
        }
        const mounts = new Set((spec.volumes ?? []).map((v) => v.name));
        for (const m of c.volumeMounts ?? []) if (!mounts.has(m.name)) errs.push(`${id}: mounts undeclared volume ${m.name}`);
      }
      for (const r of refs) if (!secrets.has(r)) errs.push(`${id}: reads Secret ${r}, neither rendered nor an existingSecret`);
    }
    if (o.kind === "Service" && !pods.some((p) => matches(o.spec.selector, podLabels(p))))
      errs.push(`${id}: selector matches no rendered pod`);
    if (o.kind === "PodDisruptionBudget" && !pods.some((p) => matches(o.spec.selector.matchLabels, podLabels(p))))
      errs.push(`${id}: selector matches no rendered pod`);
    if (o.kind === "NetworkPolicy") {
      const sel = o.spec.podSelector.matchLabels;
      for (const p of pods) if (!matches(sel, podLabels(p))) errs.push(`${id}: does not cover ${p.kind}/${p.metadata.name}`);
    }
  }
  for (const e of errs) fail(where, e);
  return errs;
}

// --- 3. values.schema.json -----------------------------------------------------
const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
const checkValues = ajv.compile(JSON.parse(readFileSync(join(chartDir, "values.schema.json"), "utf8")));
function valuesErrors(values) {
  return checkValues(values) ? [] : checkValues.errors.map((e) => `${e.instancePath} ${e.message}`);
}

// --- 4. what each value set is for ---------------------------------------------
const one = (objs, kind, suffix = "") => {
  const found = objs.filter((o) => o.kind === kind && o.metadata.name.endsWith(suffix));
  if (found.length !== 1) throw new Error(`expected one ${kind} *${suffix}, found ${found.length}`);
  return found[0];
};
const container = (o) => podSpec(o).containers[0];
const env = (o) => Object.fromEntries((container(o).env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
const kinds = (objs) => objs.map((o) => o.kind).sort().join(",");
function assert(cond, msg) { if (!cond) throw new Error(msg); }

function fleetNode(objs) {
  const ds = one(objs, "DaemonSet", "-node");
  const e = env(ds);
  assert(e.SANDBOXD_CLUSTER === "1", "SANDBOXD_CLUSTER=1");
  assert(e.SANDBOXD_NODE_ID?.fieldRef?.fieldPath === "spec.nodeName", "node id from spec.nodeName");
  assert(e.POD_IP?.fieldRef?.fieldPath === "status.podIP", "POD_IP from status.podIP");
  assert(e.SANDBOXD_ADVERTISE === "http://$(POD_IP):8080", `advertise URL is ${e.SANDBOXD_ADVERTISE}`);
  assert(e.SANDBOXD_LISTEN === "0.0.0.0:8080", "listens on every address");
  assert(e.SANDBOXD_DATABASE_URL?.secretKeyRef, "database URL from a Secret");
  assert(e.SANDBOXD_CLUSTER_SECRET_FILE === "/etc/sandboxd/cluster/secret", "cluster secret file");
  assert(!("SANDBOXD_DATABASE_OWNER_URL" in e), "the daemon never gets the owner URL");
  const names = (container(ds).env).map((x) => x.name);
  assert(names.indexOf("POD_IP") < names.indexOf("SANDBOXD_ADVERTISE"), "POD_IP defined before $(POD_IP) is used");
  const c = container(ds);
  assert(c.securityContext.privileged === true, "privileged");
  assert(podSpec(ds).hostPID === false && podSpec(ds).hostNetwork === false, "no hostPID, no hostNetwork");
  assert(podSpec(ds).automountServiceAccountToken === false, "no service account token");
  assert(c.readinessProbe.httpGet.path === "/readyz" && c.livenessProbe.httpGet.path === "/healthz", "probes");
  assert(podSpec(ds).terminationGracePeriodSeconds >= 30, "grace period to drain");
  assert(podSpec(ds).nodeSelector?.["sandboxd.dev/pool"] === "sandbox", "dedicated pool selector");
  assert(podSpec(ds).tolerations?.some((t) => t.key === "sandboxd.dev/pool" && t.effect === "NoSchedule"), "pool toleration");
  assert(c.resources?.requests?.cpu && c.resources?.limits?.memory, "resources from values");
  assert(ds.spec.updateStrategy.rollingUpdate.maxSurge === 0, "never two daemons on a node");
  return ds;
}
function dbInit(objs, hook) {
  const job = one(objs, "Job", "-db-init");
  assert(job.metadata.annotations["helm.sh/hook"] === hook, `db init hook is ${job.metadata.annotations["helm.sh/hook"]}`);
  assert(container(job).args.join(" ") === "db init", "runs sandboxd db init");
  const e = env(job);
  assert(e.SANDBOXD_DATABASE_URL?.secretKeyRef && e.SANDBOXD_DATABASE_OWNER_URL?.secretKeyRef, "both URLs");
  return job;
}
const egressRules = (objs) => one(objs, "NetworkPolicy").spec.egress;
const b64 = (s) => Buffer.from(s, "base64").toString();

const EXPECT = {
  minimal(objs) {
    assert(kinds(objs) === "DaemonSet,Job,NetworkPolicy,PodDisruptionBudget,Secret,Secret,Secret,Service,ServiceAccount", kinds(objs));
    fleetNode(objs);
    const job = dbInit(objs, "pre-install,pre-upgrade");
    const hookSecret = objs.find((o) => o.kind === "Secret" && o.metadata.name === env(job).SANDBOXD_DATABASE_OWNER_URL.secretKeyRef.name);
    assert(hookSecret?.metadata.annotations?.["helm.sh/hook"] === "pre-install,pre-upgrade", "the Job's Secret exists before it");
    assert(b64(hookSecret.data["owner-url"]).startsWith("postgresql://sandboxd_owner:"), "owner URL");
    const cluster = one(objs, "Secret", "-cluster");
    assert(b64(cluster.data["cluster-secret"]).length >= 32, "generated cluster secret ≥ 32 bytes");
    const svc = one(objs, "Service");
    assert(svc.spec.type === "ClusterIP" && svc.spec.selector["app.kubernetes.io/component"] === "node", "API on the nodes");
    const eg = egressRules(objs);
    assert(eg.some((r) => r.ports?.some((p) => p.port === 53 && p.protocol === "UDP")), "DNS egress");
    assert(eg.some((r) => r.ports?.some((p) => p.port === 5432)), "PostgreSQL egress");
    assert(eg.every((r) => !r.to?.some((t) => t.ipBlock)), "no CIDR egress by default");
  },
  gvisor(objs) {
    const rc = one(objs, "RuntimeClass");
    assert(rc.metadata.name === "gvisor" && rc.handler === "runsc", "RuntimeClass gvisor → runsc");
    assert(rc.scheduling.nodeSelector["sandboxd.dev/pool"] === "sandbox", "RuntimeClass pinned to the pool");
    const e = env(fleetNode(objs));
    assert(e.SANDBOXD_DEFAULT_PROFILE === "gvisor", "default profile gvisor");
    assert(e.SANDBOXD_NODE_SLOTS === "32", "node slots from values");
  },
  "control-plane"(objs) {
    fleetNode(objs);
    const cp = one(objs, "Deployment", "-control-plane");
    assert(cp.spec.replicas === 3, "replicas");
    const e = env(cp);
    assert(e.SANDBOXD_NODE_SLOTS === "0", "control plane offers no slots");
    assert(e.SANDBOXD_NODE_ID?.fieldRef?.fieldPath === "metadata.name", "control-plane node id is the pod name");
    const sc = container(cp).securityContext;
    assert(!sc.privileged && sc.capabilities.drop.includes("ALL"), "control plane unprivileged");
    const svc = one(objs, "Service");
    assert(svc.spec.type === "LoadBalancer" && svc.spec.selector["app.kubernetes.io/component"] === "control-plane", "API on the control plane");
    assert(svc.spec.loadBalancerSourceRanges[0] === "203.0.113.0/24", "source ranges");
    assert(objs.filter((o) => o.kind === "PodDisruptionBudget").length === 2, "a PDB each");
    const np = one(objs, "NetworkPolicy");
    const from = np.spec.ingress[0].from;
    const nsSel = from.find((f) => f.namespaceSelector).namespaceSelector.matchExpressions[0].values;
    assert(["sandboxd", "agents", "tool-gateway"].every((n) => nsSel.includes(n)), `API namespaces ${nsSel}`);
    assert(from.some((f) => f.ipBlock?.cidr === "203.0.113.0/24"), "API from the LB's clients");
    assert(b64(one(objs, "Secret", "-cluster").data["cluster-secret"]).endsWith("fixed-for-the-test"), "given cluster secret kept");
  },
  "external-secret"(objs) {
    const ds = fleetNode(objs);
    assert(!objs.some((o) => o.kind === "Secret"), "no Secret rendered: the operator's are used");
    assert(env(ds).SANDBOXD_DATABASE_URL.secretKeyRef.name === "sandboxd-db" && env(ds).SANDBOXD_DATABASE_URL.secretKeyRef.key === "app", "existing DB secret");
    const vol = podSpec(ds).volumes.find((v) => v.name === "cluster-secret").secret;
    assert(vol.secretName === "sandboxd-fleet" && vol.items[0].key === "key", "existing cluster secret");
    const job = dbInit(objs, "pre-install,pre-upgrade");
    assert(env(job).SANDBOXD_DATABASE_OWNER_URL.secretKeyRef.key === "owner", "owner key");
  },
  egress(objs) {
    const ds = fleetNode(objs);
    const eg = egressRules(objs);
    const blocks = eg.flatMap((r) => (r.to ?? []).filter((t) => t.ipBlock).map((t) => ({ ...t.ipBlock, ports: r.ports })));
    assert(blocks.some((b) => b.cidr === "10.20.0.5/32" && b.ports[0].port === 5432), "PostgreSQL by CIDR");
    assert(blocks.some((b) => b.cidr === "192.0.2.10/32" && !b.ports), "a bare CIDR, every port");
    const web = blocks.find((b) => b.cidr === "0.0.0.0/0");
    assert(web && web.except.includes("10.0.0.0/8") && web.ports.map((p) => p.port).join() === "443,80", "CIDR with except and ports");
    assert(web.ports.every((p) => p.protocol === "TCP"), "protocol defaults to TCP");
    const spec = podSpec(ds);
    assert(spec.volumes.find((v) => v.name === "cgroup")?.hostPath?.path === "/sys/fs/cgroup", "host cgroup volume");
    assert(container(ds).volumeMounts.some((m) => m.name === "cgroup" && m.mountPath === "/sys/fs/cgroup" && !m.readOnly), "mounted read-write");
    assert(spec.volumes.find((v) => v.name === "state").emptyDir, "emptyDir state");
  },
  bundled(objs) {
    fleetNode(objs);
    dbInit(objs, "post-install,pre-upgrade");
    const init = one(objs, "Secret", "-sandboxd-pg-initdb");
    const sql = init.stringData["10-sandboxd-app-role.sql"];
    assert(/CREATE ROLE sandboxd_app LOGIN PASSWORD 'app-password-1' NOSUPERUSER NOBYPASSRLS/.test(sql), sql);
    assert(b64(one(objs, "Secret", "-database").data["database-url"]) === "postgresql://sandboxd_app:app-password-1@sbx-postgresql:5432/sandboxd", "app URL to the bundled server");
    const eg = egressRules(objs);
    assert(eg.some((r) => r.to?.some((t) => t.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "postgresql")), "egress to the bundled pods");
  },
  "control-plane-only"(objs) {
    assert(kinds(objs) === "Deployment,NetworkPolicy,PodDisruptionBudget,Service,ServiceAccount", kinds(objs));
  },
};

// --- self-test: the checks reject what they must -------------------------------
async function selfTest() {
  const base = readFileSync(join(out, "minimal.yaml"), "utf8");
  const good = parseDocs(base, "self-test");
  const bad = [];
  const deployment = {
    apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "x" },
    spec: { replicas: "two", selector: { matchLabels: { a: "b" } },
            template: { metadata: { labels: { a: "b" } }, spec: { containers: [{ name: "c", image: "i" }] } } },
  };
  if ((await schemaErrors(deployment)).length === 0) bad.push("a Deployment with replicas: \"two\" passed the schema");
  const noImage = structuredClone(deployment);
  noImage.spec.replicas = 1;
  if ((await schemaErrors(noImage)).length !== 0) bad.push("a valid Deployment was rejected: " + (await schemaErrors(noImage)));
  const ds = structuredClone(good.find((o) => o.kind === "DaemonSet"));
  ds.spec.template.spec.containers[0].ports[0].containerPort = "8080";
  if ((await schemaErrors(ds)).length === 0) bad.push("a DaemonSet with a string containerPort passed the schema");
  const np = structuredClone(good.find((o) => o.kind === "NetworkPolicy"));
  np.spec.policyTypes = "Ingress";
  if ((await schemaErrors(np)).length === 0) bad.push("a NetworkPolicy with a string policyTypes passed the schema");
  const unlabelled = structuredClone(good);
  const svc = unlabelled.find((o) => o.kind === "Service");
  delete svc.metadata.labels["app.kubernetes.io/instance"];
  svc.spec.selector["app.kubernetes.io/component"] = "nobody";
  unlabelled.find((o) => o.kind === "DaemonSet").spec.selector.matchLabels["app.kubernetes.io/component"] = "other";
  unlabelled.find((o) => o.kind === "Job").spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name = "nowhere";
  const saved = failures.length;
  const errs = lint(unlabelled, {}, "self-test");
  failures.length = saved; // expected failures: not the run's
  for (const want of ["label app.kubernetes.io/instance missing", "selector does not match", "reads Secret nowhere", "Service/sbx-sandboxd: selector matches no rendered pod"]) {
    if (!errs.some((e) => e.includes(want))) bad.push(`lint did not report "${want}"`);
  }
  if (valuesErrors({ sandbox: { runtimeClass: "firecracker" } }).length === 0) bad.push("values schema accepted runtimeClass firecracker");
  if (valuesErrors({ sandbox: { networkPolicy: { egress: [{ ports: [{ port: 443 }] }] } } }).length === 0) bad.push("values schema accepted an egress rule without cidr");
  if (valuesErrors({ fleet: { clusterSecret: "short" } }).length === 0) bad.push("values schema accepted a 5-byte cluster secret");
  if (valuesErrors({ sandbox: { enabeld: true } }).length === 0) bad.push("values schema accepted a misspelt key");
  for (const b of bad) fail("self-test", b);
  console.log(`self-test: ${bad.length ? "FAILED" : "ok"} (broken Deployment/DaemonSet/NetworkPolicy rejected by the schemas, lint and values-schema mistakes caught)`);
}

await selfTest();
const sets = readdirSync(out).filter((f) => f.endsWith(".yaml")).map((f) => f.slice(0, -5)).sort();
for (const set of sets) {
  const where = set;
  const before = failures.length;
  const objs = parseDocs(readFileSync(join(out, `${set}.yaml`), "utf8"), where);
  for (const o of objs) for (const e of await schemaErrors(o)) fail(where, `${o.kind}/${o.metadata?.name}: ${e}`);
  const values = JSON.parse(readFileSync(join(out, `${set}.values.json`), "utf8"));
  for (const e of valuesErrors(values)) fail(where, `values.schema.json: ${e}`);
  lint(objs, values, where);
  const notes = readFileSync(join(out, `${set}.notes.txt`), "utf8");
  if (!notes.includes("sandboxd key create")) fail(where, "NOTES.txt does not say how to create a key");
  if (!EXPECT[set]) fail(where, "no expectations for this value set");
  else {
    try { EXPECT[set](objs); } catch (e) { fail(where, `expectation: ${e.message}`); }
  }
  console.log(`${set}: ${objs.length} objects (${kinds(objs)}) ${failures.length === before ? "ok" : "FAILED"}`);
}
if (sets.length < 5) fail("run", `only ${sets.length} value sets rendered`);
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
