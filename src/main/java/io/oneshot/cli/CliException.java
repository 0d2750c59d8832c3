package io.oneshot.cli;

/** Ends a command with a message on stderr and an exit code of {@link Main}'s table. */
final class CliException extends RuntimeException {
  final int exitCode;

  CliException(int exitCode, String message) {
    super(message);
    this.exitCode = exitCode;
  }
}
