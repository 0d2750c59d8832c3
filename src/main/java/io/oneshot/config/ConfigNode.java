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
 * A YAML node of the configuration and its path from the root, read with a rule each: a reader that
 * finds a value breaking its rule records the path and the rule ({@code routes[1].maxConcurrent:
 * must be an integer >= 0, got "six"}) and goes on with the default, so that one reading of the
 * file reports every problem in it; unknown fields are recorded with the nearest known name. The
 * problems are shared by a node and its children.
 */
record ConfigNode(JsonNode node, String path, List<String> problems) {
  /** The top of a file, with no problem recorded yet. */
  static ConfigNode root(JsonNode node) {
    return new ConfigNode(node, "", new ArrayList<>());
  }

  ConfigNode child(String name) {
    JsonNode n = node.isObject() ? node.path(name) : MissingNode.getInstance();
    return new ConfigNode(n, path.isEmpty() ? name : path + "." + name, problems);
  }

  ConfigNode index(int i) {
    JsonNode n = node.isArray() ? node.path(i) : MissingNode.getInstance();
    return new ConfigNode(n, path + "[" + i + "]", problems);
  }

  /** Records that this node breaks {@code rule}. */
  void report(String rule) {
    problems.add((path.isEmpty() ? "(top level)" : path) + ": " + rule);
  }

  void report(String rule, Object got) {
    report(rule + ", got " + quote(got));
  }

  /** Records that this node breaks {@code rule} and answers {@code fallback} in its place. */
  private <T> T bad(String rule, Object got, T fallback) {
    report(rule, got);
    return fallback;
  }

  private static String quote(Object v) {
    return v instanceof JsonNode j ? j.toString() : "\"" + v + "\"";
  }

  boolean absent() {
    return node == null || node.isMissingNode() || node.isNull();
  }

  /** This node if it is a mapping; otherwise the problem is recorded and an empty one answered. */
  ConfigNode requireObject() {
    if (node.isObject()) {
      return this;
    }
    report("must be a mapping of keys to values", node);
    return new ConfigNode(JsonNodeFactory.instance.objectNode(), path, problems);
  }

  ConfigNode object(String name) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return new ConfigNode(JsonNodeFactory.instance.objectNode(), c.path, problems);
    }
    return c.requireObject();
  }

  void allowOnly(String... known) {
    Set<String> allowed = Set.of(known);
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!allowed.contains(name)) {
        String hint = closest(name, known);
        child(name)
            .report(
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
      return c.bad("must be a string", c.node, fallback);
    }
    return c.node.asText();
  }

  int integer(String name, int fallback, int min, int max) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.canConvertToInt()
        || !c.node.isIntegralNumber()
        || c.node.intValue() < min
        || c.node.intValue() > max) {
      return c.bad("must be an integer from " + min + " to " + max, c.node, fallback);
    }
    return c.node.intValue();
  }

  double number(String name, double fallback, double min, double max) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isNumber()
        || !Double.isFinite(c.node.doubleValue())
        || c.node.doubleValue() < min
        || c.node.doubleValue() > max) {
      return c.bad("must be a number from " + min + " to " + max, c.node, fallback);
    }
    return c.node.doubleValue();
  }

  boolean bool(String name, boolean fallback) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isBoolean()) {
      return c.bad("must be true or false", c.node, fallback);
    }
    return c.node.booleanValue();
  }

  Duration duration(String name, String fallback, Duration min) {
    ConfigNode c = child(name);
    Duration byDefault = Units.parseDuration(fallback);
    if (c.absent()) {
      return byDefault;
    }
    if (!c.node.isTextual()) {
      return c.bad("must be a duration like 250ms, 2s, 5m or 1h", c.node, byDefault);
    }
    String text = c.node.asText();
    Duration d;
    try {
      d = Units.parseDuration(text);
    } catch (IllegalArgumentException e) {
      c.report(e.getMessage());
      return byDefault;
    }
    if (d.compareTo(min) < 0) {
      return c.bad("must be at least " + Units.format(min), text, byDefault);
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
      b.child("max")
          .report("must not be below initial (" + Units.format(first) + ")", Units.format(last));
      return new Backoff(first, first);
    }
    return new Backoff(first, last);
  }

  long size(String name, String fallback, long min, long max) {
    ConfigNode c = child(name);
    long byDefault = Units.parseSize(fallback);
    if (c.absent()) {
      return byDefault;
    }
    String text = c.node.asText();
    long v;
    try {
      v = Units.parseSize(text);
    } catch (IllegalArgumentException e) {
      c.report(e.getMessage());
      return byDefault;
    }
    if (v < min || v > max) {
      return c.bad(
          "must be from " + Units.formatSize(min) + " to " + Units.formatSize(max),
          text,
          byDefault);
    }
    return v;
  }

  List<String> strings(String name, List<String> fallback) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return fallback;
    }
    if (!c.node.isArray()) {
      return c.bad("must be a list of strings", c.node, fallback);
    }
    List<String> out = new ArrayList<>();
    for (int i = 0; i < c.node.size(); i++) {
      JsonNode e = c.node.get(i);
      if (e.isTextual()) {
        out.add(e.asText());
      } else {
        c.index(i).report("must be a string", e);
      }
    }
    return List.copyOf(out);
  }

  Map<String, String> tags(String name) {
    ConfigNode c = child(name);
    if (c.absent()) {
      return Map.of();
    }
    if (!c.node.isObject()) {
      return c.bad("must be a mapping of tag keys to string values", c.node, Map.of());
    }
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : c.node.properties()) {
      ConfigNode v = c.child(e.getKey());
      if (!ConfigLoader.TAG_KEY.matcher(e.getKey()).matches()) {
        v.report(
            "is not a valid tag key: 1 to 63 letters, digits, '.', '_', '-' or '/', starting"
                + " and ending with a letter or digit");
      } else if (!e.getValue().isValueNode() || e.getValue().isNull()) {
        v.report("must be a string", e.getValue());
      } else if (!ConfigLoader.TAG_VALUE.matcher(e.getValue().asText()).matches()) {
        v.report(
            "is not a valid tag value: up to 63 letters, digits, '.', '_' or '-', starting and"
                + " ending with a letter or digit",
            e.getValue().asText());
      } else {
        out.put(e.getKey(), e.getValue().asText());
      }
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
