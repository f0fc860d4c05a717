// types.ts — compiled with `tsc -p test` (make test-sdk): the documented
// usage type-checks against the built declarations (dist/*.d.ts), so a
// change that breaks users' code at compile time fails here.  Never run.
import {
  APIError, Client, ExecResult, Execution, InvalidRequestError, ManifestApplyResult, NotFoundError, RateLimitedError,
  StreamEvent, Tool, ToolManifest, Violation,
} from "@sandboxd/sdk";

declare const process: { stdout: { write(s: string): void } };

export async function seed(baseUrl: string, apiKey: string): Promise<number | null> {
  const image = "python:3.12-slim", profile = "gvisor", command = ["python", "-c", "print(1)"];
  const ex: Execution = await new Client({ baseUrl, apiKey }).sandbox.execute({ image, profile, command });
  return ex.exit_code;
}

export async function session(): Promise<ExecResult | undefined> {
  const c = new Client({ language: "fr", traceparent: () => undefined, onRetry: (i) => void i.delayMs });
  const s = await c.sandbox.sessions.create({ profile: "container", limits: { memory: "256Mi", cpu: 0.5 } });
  let last: ExecResult | undefined;
  for await (const ev of s.stream({ command: ["ls"], signal: new AbortController().signal })) {
    const e: StreamEvent = ev;
    if (e.event === "stdout" || e.event === "stderr") process.stdout.write(e.text + e.bytes.length);
    else if (e.event === "exit") last = e.result;
    else if (e.event === "gap") process.stdout.write(String(e.data.dropped_bytes));
  }
  const p = await s.start({ command: ["cat"], pty: { cols: 80 } });
  await p.stdin(new Uint8Array([1]), { eof: true });
  for await (const ev of p.follow({ stdoutOffset: 0 })) if (ev.event === "exit") last = ev.result;
  const ctx = await s.contexts.create("python");
  const r: string | null = (await ctx.run("1+1", { timeout_s: 5 })).result;
  void r;
  for await (const w of s.watch("/work", { recursive: true })) if (w.event === "end") break;
  try {
    await s.delete();
  } catch (e) {
    if (e instanceof NotFoundError) process.stdout.write(e.messageI18n.fr ?? "" + e.requestId);
    if (e instanceof RateLimitedError) process.stdout.write(String(e.retryAfter));
    if (e instanceof APIError) process.stdout.write(e.code + e.status + (e.field ?? ""));
  }
  return last;
}

export async function tools(c: Client): Promise<Execution> {
  const v = await c.contracts.validate("tool-manifest", { kind: "Tool" });
  const paths: string[] = v.violations.map((x: Violation) => x.path + x.message_i18n.fr);
  void paths;
  const m: ToolManifest = {
    apiVersion: "sandboxd/v1", kind: "Tool", metadata: { name: "add-numbers" },
    spec: { sandbox_profile: "container", image: "python:3.12-slim", command: ["python3", "add.py"],
      input_schema: { type: "object" }, limits: { timeout_s: 30 } },
  };
  const res: ManifestApplyResult = await c.tools.apply([m], { dryRun: true });
  const gen: number = res.results[0].tool.generation;
  void gen;
  for await (const t of c.tools.iter({ pageSize: 50 })) { const x: Tool = t; void x.manifest.spec.image; }
  try {
    await c.tools.invoke("add-numbers", { a: "x" }, { metadata: { run: "1" } });
  } catch (e) {
    if (e instanceof InvalidRequestError) for (const x of e.violations) process.stdout.write(x.path + (x.index ?? ""));
  }
  return c.tools.run("add-numbers", { a: 2, b: 3 }, { waitTimeoutMs: 60000 });
}
