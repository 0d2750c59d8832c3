package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** A build's {@code what}: the line a list shows of what it runs. */
class BuildWhatTest {
  @Test
  void aScriptIsItsCommandWithoutTheShell() {
    assertThat(Build.what("script", "sh -c echo hi")).isEqualTo("echo hi");
    assertThat(Build.what("script", "/bin/bash -ec make deploy")).isEqualTo("make deploy");
    assertThat(Build.what("script", "python3 run.py --fast")).isEqualTo("python3 run.py --fast");
    assertThat(Build.what("script", "shellcheck -c x")).isEqualTo("shellcheck -c x");
  }

  @Test
  void aLongOrManyLinedScriptIsItsFirstLineCut() {
    assertThat(Build.what("script", "sh -c \n\nset -eu\nmake\n")).isEqualTo("set -eu…");
    String longLine = "echo " + "x".repeat(200);
    assertThat(Build.what("script", "sh -c " + longLine))
        .hasSize(120)
        .endsWith("…")
        .startsWith("echo xxx");
  }

  @Test
  void terraformIsItsTransition() {
    assertThat(Build.what("terraform", "destroy")).isEqualTo("terraform destroy");
    assertThat(Build.what("coder", null)).isNull();
  }

  @Test
  void pulumiIsItsOperationAndStack() {
    assertThat(Build.what("pulumi", "refresh prod")).isEqualTo("pulumi refresh prod");
  }
}
