package io.oneshot.launch;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Identifies a launched attempt; {@code namespace} is null for launchers that have none. */
public record AttemptRef(long buildId, int attempt, String name, String namespace) {
  private static final Pattern NAME = Pattern.compile("^oneshot-(\\d+)-(\\d+)$");

  /** Parses a deterministic attempt name back into its build and attempt. */
  public static Optional<AttemptRef> parse(String name, String namespace) {
    Matcher m = NAME.matcher(name);
    if (!m.matches()) {
      return Optional.empty();
    }
    try {
      return Optional.of(
          new AttemptRef(
              Long.parseLong(m.group(1)), Integer.parseInt(m.group(2)), name, namespace));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  @Override
  public String toString() {
    return namespace == null ? name : namespace + "/" + name;
  }
}
