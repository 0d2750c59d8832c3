package io.oneshot.testing;

import java.io.IOException;

/**
 * Tests that run real terraform: skipped without it, unless {@code ONESHOT_REQUIRE_TERRAFORM=1}.
 */
public final class TerraformOnPath {
  private TerraformOnPath() {}

  public static void assume() {
    boolean found;
    try {
      found = new ProcessBuilder("terraform", "version").start().waitFor() == 0;
    } catch (IOException e) {
      found = false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      found = false;
    }
    Required.tool(
        found,
        "ONESHOT_REQUIRE_TERRAFORM",
        "terraform is not on PATH",
        "the terraform tests are skipped");
  }
}
