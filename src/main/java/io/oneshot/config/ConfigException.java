package io.oneshot.config;

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
}
