// Profile.java — the API's Profile schema (docs/api/openapi.yaml).
package dev.sandboxd.model;

import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;

/** A sandbox profile (GET /v1/sandbox/profiles). */
public record Profile(
        String name,
        String driver,
        @JsonProperty("class") String profileClass,
        String image,
        boolean available,
        String state,
        List<String> capabilities,
        Limits limits,
        @JsonProperty("max_limits") Limits maxLimits,
        @JsonProperty("default_timeout_s") Integer defaultTimeoutS,
        @JsonProperty("pool_size") Integer poolSize,
        @JsonProperty("default") boolean isDefault,
        String reason,
        String platform,
        @JsonProperty("platform_note") String platformNote,
        /* dedicated-kernel profiles (microvm, kata): kvm or tcg */
        String accel) {
}
