package io.oneshot.config;

import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Durations ({@code 250ms}, {@code 2s}, {@code 1h30m}) and sizes ({@code 16KiB}, {@code 1MiB}). */
public final class Units {
  private static final Pattern DURATION_PART = Pattern.compile("(\\d+)(ms|s|m|h|d)");
  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*(B|KiB|MiB|GiB)?");

  private Units() {}

  public static Duration parseDuration(String text) {
    String s = text.strip();
    if (s.isEmpty()) {
      throw new IllegalArgumentException("empty duration");
    }
    Matcher m = DURATION_PART.matcher(s);
    Duration total = Duration.ZERO;
    int end = 0;
    while (m.find()) {
      if (m.start() != end) {
        break;
      }
      long n = Long.parseLong(m.group(1));
      total =
          total.plus(
              switch (m.group(2)) {
                case "ms" -> Duration.ofMillis(n);
                case "s" -> Duration.ofSeconds(n);
                case "m" -> Duration.ofMinutes(n);
                case "h" -> Duration.ofHours(n);
                default -> Duration.ofDays(n);
              });
      end = m.end();
    }
    if (end != s.length()) {
      throw new IllegalArgumentException(
          "'" + text + "' is not a duration; write it like 250ms, 2s, 5m, 1h or 1h30m");
    }
    return total;
  }

  public static long parseSize(String text) {
    Matcher m = SIZE.matcher(text.strip());
    if (!m.matches()) {
      throw new IllegalArgumentException(
          "'" + text + "' is not a size; write it like 512, 16KiB, 1MiB or 2GiB");
    }
    long n = Long.parseLong(m.group(1));
    String unit = m.group(2) == null ? "B" : m.group(2);
    return switch (unit) {
      case "KiB" -> n << 10;
      case "MiB" -> n << 20;
      case "GiB" -> n << 30;
      default -> n;
    };
  }

  /** The shortest exact spelling: {@code 90s} as 1m30s, {@code 250ms}, {@code 2h}. */
  public static String format(Duration d) {
    if (d.isZero()) {
      return "0s";
    }
    StringBuilder b = new StringBuilder();
    long ms = d.toMillis();
    long h = ms / 3_600_000;
    ms %= 3_600_000;
    long m = ms / 60_000;
    ms %= 60_000;
    long s = ms / 1000;
    ms %= 1000;
    if (h > 0) b.append(h).append('h');
    if (m > 0) b.append(m).append('m');
    if (s > 0) b.append(s).append('s');
    if (ms > 0) b.append(ms).append("ms");
    return b.toString();
  }

  /** A human size: {@code 1 MiB}, {@code 512 B}. */
  public static String formatSize(long bytes) {
    if (bytes >= 1L << 30 && bytes % (1L << 30) == 0) return (bytes >> 30) + " GiB";
    if (bytes >= 1L << 20 && bytes % (1L << 20) == 0) return (bytes >> 20) + " MiB";
    if (bytes >= 1L << 10 && bytes % (1L << 10) == 0) return (bytes >> 10) + " KiB";
    return String.format(Locale.ROOT, "%d B", bytes);
  }
}
