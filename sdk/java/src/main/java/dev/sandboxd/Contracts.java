// Contracts.java — client.contracts(): named JSON Schema contracts.
package dev.sandboxd;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandboxd.model.ContractValidation;
import java.util.Arrays;
import java.util.List;

/** The contracts (today "tool-manifest", docs/contracts.md) and validation against them; nothing is stored. */
public final class Contracts {
    private final Transport t;

    Contracts(Transport t) {
        this.t = t;
    }

    /** The contract names. */
    public List<String> list() {
        return Arrays.asList(Transport.convert(t.tree(new Transport.Call("listContracts")).path("contracts"),
            String[].class));
    }

    /** The contract's JSON Schema (draft-07), as served (application/schema+json). */
    public JsonNode get(String name) {
        return t.tree(new Transport.Call("getContract").param("name", name)
            .accept("application/schema+json, application/json"));
    }

    /**
     * Every violation of document (any JSON value: a JsonNode, a Map, a
     * ToolManifest, …) against the contract, each with the JSON pointer of the
     * value at fault.  A bad document is a result (valid false), not an exception.
     */
    public ContractValidation validate(String name, Object document) {
        return t.json(new Transport.Call("validateContract").param("name", name).json(Transport.tree(document)),
            ContractValidation.class);
    }
}
