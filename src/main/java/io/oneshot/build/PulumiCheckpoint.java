package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;

/**
 * A Pulumi stack's checkpoint, the file its DIY backend keeps at {@code
 * .pulumi/stacks/<project>/<stack>.json}: the workspace's state of a pulumi build. What is checked
 * is what the Pulumi CLI needs to load it, after pulumi/pulumi:
 *
 * <ul>
 *   <li>{@code {"version": N, "checkpoint": {...}}} (sdk/go/common/apitype/core.go,
 *       VersionedCheckpoint); versions 1 to 3 are read, others refused ("unsupported checkpoint
 *       version", pkg/resource/stack/checkpoint.go,
 *       UnmarshalVersionedCheckpointToLatestCheckpoint);
 *   <li>the checkpoint's {@code stack} (a name), {@code config} (an object), {@code latest} (the
 *       deployment, or null): {@code manifest} with {@code time} (RFC 3339), {@code magic} and
 *       {@code version} (strings); {@code secrets_providers} with its {@code type}; {@code
 *       resources} and {@code pending_operations} arrays of resources with {@code urn} and {@code
 *       type} (CheckpointV3, DeploymentV3, ManifestV1, ResourceV3, OperationV2): Go's JSON decoder
 *       refuses a value of another type, so the CLI would not load such a file.
 * </ul>
 */
public final class PulumiCheckpoint {
  /** The newest checkpoint version (apitype.DeploymentSchemaVersionCurrent). */
  public static final int CURRENT_VERSION = 3;

  private PulumiCheckpoint() {}

  /** Why {@code text} is not a checkpoint Pulumi loads, or null. */
  public static String problemOf(String text) {
    return problemOf(parse(text));
  }

  /** Why {@code tree} (as {@link #parse} read it) is not a checkpoint Pulumi loads, or null. */
  public static String problemOf(JsonNode tree) {
    if (tree == null || !tree.isObject()) {
      return "not a JSON object";
    }
    return problem(tree.get("version"), tree.path("checkpoint"));
  }

  /** {@code text} read as JSON, or null when it is not JSON (a file half written, garbage). */
  public static JsonNode parse(String text) {
    try {
      return io.oneshot.api.Json.tree(text);
    } catch (java.io.UncheckedIOException e) {
      return null;
    }
  }

  /** Why {@code version} and {@code checkpoint} are not a checkpoint Pulumi loads, or null. */
  public static String problem(JsonNode version, JsonNode checkpoint) {
    if (version == null || !version.isIntegralNumber()) {
      return "version must be a number (1 to " + CURRENT_VERSION + ")";
    }
    if (!version.canConvertToInt()
        || version.intValue() < 1
        || version.intValue() > CURRENT_VERSION) {
      return "unsupported checkpoint version " + version.asText();
    }
    if (!checkpoint.isObject()) {
      return "checkpoint must be an object";
    }
    JsonNode stack = checkpoint.path("stack");
    if (!stack.isTextual() || stack.asText().isEmpty()) {
      return "checkpoint.stack must name the stack";
    }
    if (present(checkpoint, "config") && !checkpoint.get("config").isObject()) {
      return "checkpoint.config must be an object";
    }
    JsonNode latest = checkpoint.path("latest");
    if (!present(checkpoint, "latest")) {
      return null;
    }
    if (!latest.isObject()) {
      return "checkpoint.latest must be an object";
    }
    JsonNode manifest = latest.path("manifest");
    if (!manifest.isObject()) {
      return "checkpoint.latest.manifest must be an object";
    }
    if (present(manifest, "time")) {
      if (!manifest.get("time").isTextual()) {
        return "checkpoint.latest.manifest.time must be a time";
      }
      try {
        OffsetDateTime.parse(manifest.get("time").asText());
      } catch (DateTimeParseException e) {
        return "checkpoint.latest.manifest.time is not an RFC 3339 time";
      }
    }
    for (String f : new String[] {"magic", "version"}) {
      if (present(manifest, f) && !manifest.get(f).isTextual()) {
        return "checkpoint.latest.manifest." + f + " must be a string";
      }
    }
    if (present(latest, "secrets_providers")) {
      JsonNode sp = latest.get("secrets_providers");
      if (!sp.isObject() || !sp.path("type").isTextual()) {
        return "checkpoint.latest.secrets_providers must be an object with a type";
      }
    }
    String r = resources(latest, "resources", false);
    return r != null ? r : resources(latest, "pending_operations", true);
  }

  private static String resources(JsonNode latest, String field, boolean operations) {
    if (!present(latest, field)) {
      return null;
    }
    JsonNode list = latest.get(field);
    if (!list.isArray()) {
      return "checkpoint.latest." + field + " must be an array";
    }
    for (int i = 0; i < list.size(); i++) {
      String at = "checkpoint.latest." + field + "[" + i + "]";
      JsonNode r = operations ? list.get(i).path("resource") : list.get(i);
      if (operations) {
        at += ".resource";
        if (!list.get(i).path("type").isTextual()) {
          return "checkpoint.latest." + field + "[" + i + "].type must be a string";
        }
      }
      if (!r.isObject()) {
        return at + " must be an object";
      }
      if (!r.path("urn").isTextual() || r.path("urn").asText().isEmpty()) {
        return at + ".urn must be a resource URN";
      }
      if (!r.path("type").isTextual()) {
        return at + ".type must be a string";
      }
      for (String b : new String[] {"custom", "delete", "protect", "external"}) {
        if (present(r, b) && !r.get(b).isBoolean()) {
          return at + "." + b + " must be true or false";
        }
      }
      for (String o : new String[] {"inputs", "outputs"}) {
        if (present(r, o) && !r.get(o).isObject()) {
          return at + "." + o + " must be an object";
        }
      }
    }
    return null;
  }

  /**
   * Whether {@code node} has {@code field} with a value other than null (Go reads null as absent).
   */
  private static boolean present(JsonNode node, String field) {
    JsonNode v = node.get(field);
    return v != null && !v.isNull();
  }

  /** The number of resources of a checkpoint's latest deployment (0 when it has none). */
  public static int resourceCount(JsonNode versioned) {
    JsonNode r = versioned.path("checkpoint").path("latest").path("resources");
    return r.isArray() ? r.size() : 0;
  }
}
