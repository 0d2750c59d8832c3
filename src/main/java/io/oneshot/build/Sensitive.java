package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A build's sensitive values: {@code input.sensitive} names entries of {@code input.env} (script),
 * {@code input.variables} (terraform) or {@code input.config} (pulumi) that the log masks, the API
 * never returns and, submitted through the API, the database holds only sealed (in {@code
 * builds.sealed}; the input keeps {@link #MASK} in their place).
 */
public final class Sensitive {
  /** What stands for a sensitive value wherever it would show. */
  public static final String MASK = "***";

  private Sensitive() {}

  /** The object of {@code input} that {@code input.sensitive} names entries of. */
  private static String holder(JsonNode input) {
    return switch (input.path("provisioner").asText()) {
      case "script" -> "env";
      case "pulumi" -> "config";
      default -> "variables";
    };
  }

  /** The names {@code input.sensitive} lists that {@code input} has values for. */
  public static List<String> names(JsonNode input) {
    List<String> out = new ArrayList<>();
    if (input == null || !input.path("sensitive").isArray()) {
      return out;
    }
    JsonNode values = input.path(holder(input));
    for (JsonNode n : input.path("sensitive")) {
      if (n.isTextual() && values.has(n.asText())) {
        out.add(n.asText());
      }
    }
    return out;
  }

  /**
   * Splits a submitted input: a copy with {@link #MASK} in place of each sensitive value, and the
   * values themselves as a JSON object (null when there are none).
   */
  public record Split(JsonNode input, String values) {}

  public static Split split(JsonNode input) {
    List<String> names = names(input);
    if (names.isEmpty()) {
      return new Split(input, null);
    }
    ObjectNode copy = input.deepCopy();
    ObjectNode held = (ObjectNode) copy.path(holder(input));
    ObjectNode values = Json.MAPPER.createObjectNode();
    for (String n : names) {
      values.set(n, held.get(n));
      held.put(n, MASK);
    }
    return new Split(copy, Json.write(values));
  }

  /** {@code input} with the values of {@code values} (from {@link #split}) put back. */
  public static JsonNode merge(JsonNode input, String values) {
    if (values == null || input == null || !input.isObject()) {
      return input;
    }
    ObjectNode copy = input.deepCopy();
    JsonNode held = copy.path(holder(input));
    JsonNode vs = Json.tree(values);
    if (held instanceof ObjectNode h && vs != null) {
      vs.properties().forEach(e -> h.set(e.getKey(), e.getValue()));
    }
    return copy;
  }

  /** {@code input} with each sensitive value replaced by {@link #MASK}: what the API answers. */
  public static JsonNode masked(JsonNode input) {
    return split(input).input();
  }

  /**
   * The texts to mask in a log: each sensitive value as it would print (a string as it is, any
   * other value as JSON), the empty ones left out.
   */
  public static List<String> texts(JsonNode input) {
    Map<String, String> out = new LinkedHashMap<>();
    JsonNode values = input == null ? null : input.path(holder(input));
    for (String n : names(input)) {
      String text = text(values.get(n));
      if (!text.isEmpty() && !text.equals(MASK)) {
        out.put(text, n);
      }
    }
    return new ArrayList<>(out.keySet());
  }

  /** A value as it prints: a string as it is, any other value as JSON. */
  public static String text(JsonNode value) {
    return value.isTextual() ? value.asText() : Json.write(value);
  }
}
