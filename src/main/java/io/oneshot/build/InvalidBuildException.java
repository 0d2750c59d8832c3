package io.oneshot.build;

/**
 * A build refused by {@code oneshot.enqueue()}'s validation. {@code field} is the offending field's
 * path ({@code tags.os}, {@code input.command[1]}); the message starts with it.
 */
public final class InvalidBuildException extends RuntimeException {
  private final String field;
  private final String hint;

  public InvalidBuildException(String field, String message, String hint) {
    super(message);
    this.field = field;
    this.hint = hint;
  }

  public String field() {
    return field;
  }

  /** How to fix it, or null. */
  public String hint() {
    return hint;
  }
}
