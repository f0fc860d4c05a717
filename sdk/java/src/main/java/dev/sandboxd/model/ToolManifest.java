// ToolManifest.java — the API's ToolManifest schema (docs/api/openapi.yaml;
// its JSON Schema is contracts/v1/tool-manifest.schema.json).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.annotation.JsonPropertyOrder;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@code tool-manifest} document (docs/contracts.md): read one from
 * {@link Tool#manifest()}, or build one to apply:
 * <pre>{@code
 * ToolManifest m = ToolManifest.builder("add-numbers").profile("container").image("python:3.12-slim")
 *     .command("python3", "add.py").inputSchema(Map.of("type", "object")).build();
 * }</pre>
 * Fields left null are not sent.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record ToolManifest(
        String apiVersion,
        String kind,
        Metadata metadata,
        Spec spec) {

    /**
     * The tool's name (lower-case letters, digits and '-', at most 63), what it
     * does (description: MCP clients show it) and labels.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Metadata(String name, String description, Map<String, String> labels) {
    }

    /**
     * What the tool runs: in {@code sandboxProfile} on {@code image}, a
     * {@code command}, or a {@code language} ("python", "node", "bash") and an
     * {@code entrypoint}; {@code inputSchema} is a draft-07 JSON Schema of its
     * input; {@code limits} and {@code network} are the API's (LimitsRequest,
     * NetworkRequest); {@code collect} globs the files kept after the run.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    @JsonPropertyOrder({"sandbox_profile", "image", "command", "language", "entrypoint", "input_schema", "limits",
        "network", "collect", "timeout_s"})
    public record Spec(
            @JsonProperty("sandbox_profile") String sandboxProfile,
            String image,
            List<String> command,
            String language,
            String entrypoint,
            @JsonProperty("input_schema") JsonNode inputSchema,
            JsonNode limits,
            JsonNode network,
            List<String> collect,
            @JsonProperty("timeout_s") Double timeoutS) {
    }

    /** A builder of a manifest named name (apiVersion sandboxd/v1, kind Tool). */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** Builds a {@link ToolManifest}; every setter takes null for "not sent". */
    public static final class Builder {
        private static final ObjectMapper JSON = new ObjectMapper();
        private final String name;
        private String description;
        private Map<String, String> labels;
        private String profile;
        private String image;
        private List<String> command;
        private String language;
        private String entrypoint;
        private JsonNode inputSchema;
        private JsonNode limits;
        private JsonNode network;
        private List<String> collect;
        private Double timeoutS;

        private Builder(String name) {
            this.name = name;
        }

        private static JsonNode tree(Object v) {
            return v == null ? null : v instanceof JsonNode ? (JsonNode) v : JSON.valueToTree(v);
        }

        /** metadata.description: what the tool does. */
        public Builder description(String description) {
            this.description = description;
            return this;
        }

        public Builder label(String key, String value) {
            if (labels == null) labels = new LinkedHashMap<>();
            labels.put(key, value);
            return this;
        }

        /** spec.sandbox_profile: the profile the tool runs in. */
        public Builder profile(String profile) {
            this.profile = profile;
            return this;
        }

        public Builder image(String image) {
            this.image = image;
            return this;
        }

        public Builder command(List<String> command) {
            this.command = command == null ? null : List.copyOf(command);
            return this;
        }

        public Builder command(String... command) {
            return command(List.of(command));
        }

        /** "python", "node" or "bash", with {@link #entrypoint}. */
        public Builder language(String language) {
            this.language = language;
            return this;
        }

        public Builder entrypoint(String entrypoint) {
            this.entrypoint = entrypoint;
            return this;
        }

        /** A draft-07 JSON Schema of the input: a Map or a JsonNode. */
        public Builder inputSchema(Object schema) {
            this.inputSchema = tree(schema);
            return this;
        }

        /** Limits: a Map or a JsonNode ({@code new LimitsRequest().timeoutS(30).toJson()}). */
        public Builder limits(Object limits) {
            this.limits = tree(limits);
            return this;
        }

        /** The egress policy: a Map or a JsonNode ({@code NetworkRequest.none().toJson()}). */
        public Builder network(Object network) {
            this.network = tree(network);
            return this;
        }

        public Builder collect(String... globs) {
            this.collect = List.of(globs);
            return this;
        }

        public Builder timeoutS(Double timeoutS) {
            this.timeoutS = timeoutS;
            return this;
        }

        public ToolManifest build() {
            return new ToolManifest("sandboxd/v1", "Tool",
                new Metadata(name, description, labels == null ? null : Map.copyOf(labels)),
                new Spec(profile, image, command, language, entrypoint, inputSchema, limits, network, collect,
                    timeoutS));
        }
    }
}
