// ProfileList.java — the API's ProfileList schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** The profiles this key may use, and the default one. */
public record ProfileList(
        List<Profile> profiles,
        @JsonProperty("default") String defaultProfile) {
    /** The profile of that name, or null. */
    public Profile get(String name) {
        return profiles.stream().filter(p -> p.name().equals(name)).findFirst().orElse(null);
    }
}
