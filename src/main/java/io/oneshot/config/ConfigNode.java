package io.oneshot.config;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.MissingNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A YAML node of the configuration and its path from the root, read with a rule each: every reader
 * fails with the path and the rule ({@code routes[1].maxConcurrent: must be an integer >= 0, got
 * "six"}), and unknown fields are refused with the nearest known name.
 */
record ConfigNode(JsonNode node, String path) {
  ConfigNode child(String name) {
    JsonNode n = node.isObject() ? node.path(name) : MissingNode.getInstance();
    return new ConfigNode(n, path.isEmpty() ? name : path + "." + name);
  }

  ConfigNode index(int i) {
    return new ConfigNode(node.get(i), path + "[" + i + "]");
  }

  ConfigException invalid(String rule) {
    return new ConfigException((path.isEmpty() ? "(top level)" : path) + ": " + rule);
  }

  ConfigException invalid(String rule, Object got) {
    return invalid(rule + ", got " + quote(got));
  }

  private static String quote(Object v) {
    return v instanceof JsonNode j ? j.toString() : "\"" + v + "\"";
  }

  boolean absent() {
    return node == null || node.isMissingNode() || node.isNull();
  }

  void requireObject() {
    if (!node.isObject()) {
      throw invalid("must be a mapping of keys to values", node);
    }
  }

  ConfigNode object(String name) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return new ConfigNode(JsonNodeFactory.instance.objectNode(), c.path);
    }
    c.requireObject();
    return c;
  }

  void allowOnly(String... known) {
    Set<String> allowed = Set.of(known);
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!allowed.contains(name)) {
        String hint = closest(name, known);
        throw child(name)
            .invalid(
                "unknown field"
                    + (hint == null ? "" : " (did you mean " + hint + "?)")
                    + "; known fields: "
                    + String.join(", ", known));
      }
    }
  }

  String string(String name, String fallback) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isTextual() && !c.node.isNumber() && !c.node.isBoolean()) {
      throw c.invalid("must be a string", c.node);
    }
    return c.node.asText();
  }

  int integer(String name, int fallback, int min, int max) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.canConvertToInt() || !c.node.isIntegralNumber()) {
      throw c.invalid("must be an integer from " + min + " to " + max, c.node);
    }
    int v = c.node.intValue();
    if (v < min || v > max) {
      throw c.invalid("must be an integer from " + min + " to " + max, c.node);
    }
    return v;
  }

  boolean bool(String name, boolean fallback) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isBoolean()) {
      throw c.invalid("must be true or false", c.node);
    }
    return c.node.booleanValue();
  }

  Duration duration(String name, String fallback, Duration min) {
    ConfigNode c = child(name);
    String text = c.absent() ? fallback : c.node.asText();
    if (!c.absent() && !c.node.isTextual()) {
      throw c.invalid("must be a duration like 250ms, 2s, 5m or 1h", c.node);
    }
    Duration d;
    try {
      d = Units.parseDuration(text);
    } catch (IllegalArgumentException e) {
      throw c.invalid(e.getMessage());
    }
    if (d.compareTo(min) < 0) {
      throw c.invalid("must be at least " + Units.format(min), text);
    }
    return d;
  }

  /** A {@link Backoff}: {@code {initial: 500ms, max: 30s}}, each part with its default. */
  Backoff backoff(String name, String initial, String max) {
    ConfigNode b = object(name);
    b.allowOnly("initial", "max");
    Duration first = b.duration("initial", initial, Duration.ofMillis(10));
    Duration last = b.duration("max", max, Duration.ofMillis(10));
    if (last.compareTo(first) < 0) {
      throw b.child("max")
          .invalid("must not be below initial (" + Units.format(first) + ")", Units.format(last));
    }
    return new Backoff(first, last);
  }

  long size(String name, String fallback, long min, long max) {
    ConfigNode c = child(name);
    String text = c.absent() ? fallback : c.node.asText();
    long v;
    try {
      v = Units.parseSize(text);
    } catch (IllegalArgumentException e) {
      throw c.invalid(e.getMessage());
    }
    if (v < min || v > max) {
      throw c.invalid(
          "must be from " + Units.formatSize(min) + " to " + Units.formatSize(max), text);
    }
    return v;
  }

  List<String> strings(String name, List<String> fallback) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isArray()) {
      throw c.invalid("must be a list of strings", c.node);
    }
    List<String> out = new ArrayList<>();
    for (int i = 0; i < c.node.size(); i++) {
      JsonNode e = c.node.get(i);
      if (!e.isTextual()) {
        throw c.index(i).invalid("must be a string", e);
      }
      out.add(e.asText());
    }
    return List.copyOf(out);
  }

  Map<String, String> tags(String name) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return Map.of();
    }
    if (!c.node.isObject()) {
      throw c.invalid("must be a mapping of tag keys to string values", c.node);
    }
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : c.node.properties()) {
      ConfigNode v = c.child(e.getKey());
      if (!ConfigLoader.TAG_KEY.matcher(e.getKey()).matches()) {
        throw v.invalid(
            "is not a valid tag key: 1 to 63 letters, digits, '.', '_', '-' or '/', starting"
                + " and ending with a letter or digit");
      }
      if (!e.getValue().isValueNode() || e.getValue().isNull()) {
        throw v.invalid("must be a string", e.getValue());
      }
      String value = e.getValue().asText();
      if (!ConfigLoader.TAG_VALUE.matcher(value).matches()) {
        throw v.invalid(
            "is not a valid tag value: up to 63 letters, digits, '.', '_' or '-', starting and"
                + " ending with a letter or digit",
            value);
      }
      out.put(e.getKey(), value);
    }
    return Map.copyOf(out);
  }

  /** The known name nearest to a misspelt one, if it is near enough to be a likely typo. */
  static String closest(String name, String... known) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String k : known) {
      int d = distance(name.toLowerCase(), k.toLowerCase());
      if (d < bestDistance) {
        bestDistance = d;
        best = k;
      }
    }
    return bestDistance <= Math.max(2, name.length() / 4) ? best : null;
  }

  private static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    int[] cur = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
      }
      int[] t = prev;
      prev = cur;
      cur = t;
    }
    return prev[b.length()];
  }
}
