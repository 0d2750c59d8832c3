package io.oneshot.config;

/**
 * The patterns of a route's pod rules: {@code *} matches any run of characters, {@code ?} one
 * character, and every other character itself. Turned into anchored regular expressions that mean
 * the same in Java and in PostgreSQL (where {@code oneshot.check_pod()} matches them at enqueue): a
 * character that is not a letter or a digit is escaped with a backslash, which both read as that
 * character.
 */
public final class Globs {
  private Globs() {}

  public static String toRegex(String glob) {
    StringBuilder out = new StringBuilder("^");
    for (int i = 0; i < glob.length(); i++) {
      char c = glob.charAt(i);
      if (c == '*') {
        out.append(".*");
      } else if (c == '?') {
        out.append('.');
      } else if (Character.isLetterOrDigit(c) && c < 128) {
        out.append(c);
      } else if (c < 128) {
        out.append('\\').append(c);
      } else {
        out.append(c);
      }
    }
    return out.append('$').toString();
  }
}
