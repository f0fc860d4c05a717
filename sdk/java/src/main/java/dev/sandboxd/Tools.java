// Tools.java — client.tools(): tools applied from tool manifests, run as executions.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandboxd.model.Execution;
import dev.sandboxd.model.ManifestApplyResult;
import dev.sandboxd.model.Tool;
import dev.sandboxd.model.ToolInvoked;
import dev.sandboxd.model.ToolList;
import dev.sandboxd.model.ToolManifest;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * Tools: apply manifests (idempotent per name), list, get, delete, invoke
 * (an execution in the tool's spec.sandbox_profile) and run (invoke, then
 * wait for the final state).
 */
public final class Tools {
    private final Transport t;

    Tools(Transport t) {
        this.t = t;
    }

    /** Creates or updates one tool; its result's action is created, updated or unchanged. */
    public ManifestApplyResult apply(ToolManifest manifest) {
        return apply(manifest, false);
    }

    /** dryRun: check and report the action, store nothing. */
    public ManifestApplyResult apply(ToolManifest manifest, boolean dryRun) {
        return apply(Transport.tree(manifest), dryRun);
    }

    /**
     * Applies 1 to 64 manifests all or nothing: one bad document applies none,
     * and the InvalidRequestException's {@link ApiException#violations()} list
     * every violation ({@code index} the document, {@code path} in it).
     */
    public ManifestApplyResult apply(List<ToolManifest> manifests) {
        return apply(manifests, false);
    }

    public ManifestApplyResult apply(List<ToolManifest> manifests, boolean dryRun) {
        ObjectNode body = Transport.object();
        body.set("items", Transport.tree(manifests));
        return apply(body, dryRun);
    }

    /** A document as read from a file: one manifest, or {"items": [...]}. */
    public ManifestApplyResult apply(JsonNode document, boolean dryRun) {
        return t.json(new Transport.Call("applyManifests").query("dry_run", dryRun ? true : null).json(document),
            ManifestApplyResult.class);
    }

    /** The first page of tools, in name order. */
    public ToolList list() {
        return list(null, null);
    }

    /** A page of tools, in name order; either argument may be null. */
    public ToolList list(Integer limit, String cursor) {
        return t.json(new Transport.Call("listTools").query("limit", limit).query("cursor", cursor), ToolList.class);
    }

    /** Every tool of the tenant, in name order, pages fetched as needed. */
    public Iterable<Tool> iterate() {
        return Paging.all(cursor -> {
            ToolList l = list(200, cursor);
            return new Paging.Page<>(l.tools(), l.nextCursor());
        });
    }

    /** The tool with its manifest (NotFoundException when there is none). */
    public Tool get(String name) {
        return t.json(new Transport.Call("getTool").param("name", name), Tool.class);
    }

    /** Deletes the tool; executions it started run on. */
    public void delete(String name) {
        t.send(new Transport.Call("deleteTool").param("name", name).expect(204));
    }

    public ToolInvoked invoke(String name, Object input) {
        return invoke(name, input, null);
    }

    /**
     * Queues an execution of the tool with this input (any JSON value its
     * input_schema accepts: a Map, a List, a JsonNode, …; null sends none:
     * the daemon's default, {}), which the program reads as JSON on its
     * stdin.  An input the schema refuses throws InvalidRequestException
     * whose violations have paths under /input.  metadata labels the
     * execution (null: none).
     */
    public ToolInvoked invoke(String name, Object input, Map<String, String> metadata) {
        ObjectNode body = Transport.object();
        if (input != null) body.set("input", Transport.tree(input));
        Transport.put(body, "metadata", metadata);
        return t.json(new Transport.Call("invokeTool").param("name", name).json(body).expect(202),
            ToolInvoked.class);
    }

    /** invoke, then waits (long-polls) for the execution's final state and returns it. */
    public Execution run(String name, Object input) {
        return run(name, input, null, null);
    }

    /** The same, the wait bounded by timeout (null: none; past it a SandboxdTimeoutException). */
    public Execution run(String name, Object input, Duration timeout) {
        return run(name, input, null, timeout);
    }

    public Execution run(String name, Object input, Map<String, String> metadata, Duration timeout) {
        ToolInvoked invoked = invoke(name, input, metadata);
        return new Executions(t).wait(invoked.id(), timeout);
    }
}
