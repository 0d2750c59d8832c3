package io.oneshot.api;

/**
 * Text from a client or a build shown to a person: every control character but the tab (C0, DEL,
 * C1) and the bidirectional overrides that reorder what a terminal shows are written as escapes
 * ({@code \x1b}, {@code \u202e}), so that a build's output cannot move the cursor, retitle the
 * terminal or disguise what follows it.
 */
public final class Visible {
  private Visible() {}

  /** {@code s} with its control characters made visible; null stays null. */
  public static String text(String s) {
    if (s == null || s.chars().noneMatch(Visible::hidden)) {
      return s;
    }
    StringBuilder b = new StringBuilder(s.length() + 16);
    s.chars()
        .forEach(
            c -> {
              if (!hidden(c)) {
                b.append((char) c);
              } else if (c <= 0xff) {
                b.append(String.format("\\x%02x", c));
              } else {
                b.append(String.format("\\u%04x", c));
              }
            });
    return b.toString();
  }

  /** {@link #text(String)} keeping its line breaks: a message of several lines. */
  public static String lines(String s) {
    return s == null ? null : String.join("\n", s.lines().map(Visible::text).toList());
  }

  /** {@link #text(String)}, cut to {@code max} characters with an ellipsis. */
  public static String text(String s, int max) {
    String v = text(s);
    return v == null || v.length() <= max ? v : v.substring(0, max) + "…";
  }

  private static boolean hidden(int c) {
    return (c < 0x20 && c != '\t')
        || (c >= 0x7f && c <= 0x9f)
        || (c >= 0x202a && c <= 0x202e)
        || (c >= 0x2066 && c <= 0x2069);
  }
}
