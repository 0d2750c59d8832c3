package io.oneshot.testing;

import org.junit.jupiter.api.Assumptions;

/**
 * A tool some tests need (terraform, promtool, Chromium, the Kubernetes schema): without it they
 * are skipped, unless its {@code ONESHOT_REQUIRE_*} variable is 1 ({@code .ci/run} sets them all),
 * where its absence fails them.
 */
public final class Required {
  private Required() {}

  /** Whether {@code variable} asks for the tool to be there. */
  public static boolean required(String variable) {
    return "1".equals(System.getenv(variable));
  }

  /**
   * Fails (when required) or skips the test unless {@code found}; {@code missing} says what is
   * missing and how to get it, {@code skipped} what is skipped without it.
   */
  public static void tool(boolean found, String variable, String missing, String skipped) {
    if (!found && required(variable)) {
      throw new AssertionError(missing + ", and " + variable + "=1");
    }
    Assumptions.assumeTrue(found, missing + ": " + skipped);
  }
}
