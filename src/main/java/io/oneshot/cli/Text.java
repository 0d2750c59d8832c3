package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Visible;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Plain-text rendering for the CLI: tables, durations, tags, log lines. */
final class Text {
  private Text() {}

  /** {@code 850ms}, {@code 3.2s}, {@code 4m05s}, {@code 2h13m}. */
  static String duration(Duration d) {
    long ms = Math.max(0, d.toMillis());
    if (ms < 1000) {
      return ms + "ms";
    }
    if (ms < 60_000) {
      return String.format("%.1fs", ms / 1000.0);
    }
    long s = ms / 1000;
    if (s < 3600) {
      return String.format("%dm%02ds", s / 60, s % 60);
    }
    return String.format("%dh%02dm", s / 3600, (s % 3600) / 60);
  }

  private static final java.time.format.DateTimeFormatter AT =
      java.time.format.DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss", java.util.Locale.ROOT);

  /**
   * A moment as every command prints it, to the second, in {@code zone}: {@code 2026-12-06 19:10:05
   * UTC}, or with the zone's offset ({@code 2026-12-06 20:10:05 +01:00}); the console writes the
   * same. "-" for none.
   */
  static String at(Instant t, java.time.ZoneId zone) {
    if (t == null) {
      return "-";
    }
    java.time.ZonedDateTime z = t.atZone(zone);
    java.time.ZoneOffset offset = z.getOffset();
    return AT.format(z) + " " + (offset.getTotalSeconds() == 0 ? "UTC" : offset.getId());
  }

  /** {@link #at(Instant, java.time.ZoneId)} of an API's time ({@code 2026-12-06T19:10:05.123Z}). */
  static String at(JsonNode n, java.time.ZoneId zone) {
    return at(time(n), zone);
  }

  static Instant time(JsonNode n) {
    return n == null || n.isNull() || n.isMissingNode() ? null : Instant.parse(n.asText());
  }

  static String between(JsonNode from, JsonNode to) {
    Instant a = time(from);
    if (a == null) {
      return "-";
    }
    Instant b = time(to);
    return duration(Duration.between(a, b == null ? Instant.now() : b));
  }

  static String tags(JsonNode tags) {
    Map<String, String> map = new LinkedHashMap<>();
    if (tags != null && tags.isObject()) {
      tags.properties().forEach(e -> map.put(e.getKey(), e.getValue().asText()));
    }
    return tags(map);
  }

  static String tags(Map<String, String> tags) {
    if (tags.isEmpty()) {
      return "-";
    }
    List<String> parts = new ArrayList<>();
    tags.forEach((k, v) -> parts.add(k + "=" + v));
    return String.join(",", parts);
  }

  static String orDash(JsonNode n) {
    return n == null || n.isNull() || n.isMissingNode() || n.asText().isEmpty() ? "-" : n.asText();
  }

  /** A log line as text: build output as it was, oneshot's own lines marked. */
  static String logLine(JsonNode line) {
    String text = Visible.text(line.path("text").asText());
    return "system".equals(line.path("stream").asText()) ? "[oneshot] " + text : text;
  }

  /** Columns padded to their widest cell; the last column is not padded. */
  static String table(List<String> header, List<List<String>> rows) {
    List<List<String>> all = new ArrayList<>();
    all.add(header);
    all.addAll(rows);
    return columns(all);
  }

  /**
   * Rows padded into columns, without a header; a cell's control characters (a build's output in
   * its reason, a newline in an error) are shown as escapes, never sent to the terminal.
   */
  static String columns(List<List<String>> cells) {
    List<List<String>> all =
        cells.stream().map(r -> r.stream().map(Visible::text).toList()).toList();
    int[] w = new int[all.stream().mapToInt(List::size).max().orElse(0)];
    for (List<String> r : all) {
      for (int i = 0; i < r.size(); i++) {
        w[i] = Math.max(w[i], r.get(i).length());
      }
    }
    StringBuilder b = new StringBuilder();
    for (List<String> r : all) {
      for (int i = 0; i < r.size(); i++) {
        String cell = r.get(i);
        b.append(cell);
        if (i < r.size() - 1) {
          b.append(" ".repeat(w[i] - cell.length() + 2));
        }
      }
      b.append('\n');
    }
    return b.toString();
  }
}
