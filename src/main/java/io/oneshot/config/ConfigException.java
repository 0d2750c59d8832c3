package io.oneshot.config;

import java.util.List;

/**
 * A configuration error; the message names the field and the rule, like {@code routes[2].tags:
 * ...}.
 */
public final class ConfigException extends RuntimeException {
  public ConfigException(String message) {
    super(message);
  }

  public ConfigException(String message, Throwable cause) {
    super(message, cause);
  }

  /** Every problem found, as one exception: see {@link #summary}. */
  public static ConfigException of(List<String> problems) {
    return new ConfigException(summary(problems));
  }

  /** The one problem, or {@code N problems:} and one indented line each. */
  public static String summary(List<String> problems) {
    if (problems.size() == 1) {
      return problems.get(0);
    }
    StringBuilder b = new StringBuilder().append(problems.size()).append(" problems:");
    problems.forEach(p -> b.append("\n  ").append(p));
    return b.toString();
  }
}
