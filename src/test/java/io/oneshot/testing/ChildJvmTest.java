package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class ChildJvmTest {
  /** A child JVM that says it is up, then waits to be killed. */
  public static final class Idle {
    public static void main(String[] args) throws InterruptedException {
      System.out.println("up");
      System.out.flush();
      Thread.sleep(Long.MAX_VALUE);
    }
  }

  /**
   * A JVM killed after {@code jcmd} attached to it (as the footprint benchmark does with the
   * dispatcher it measures) leaves no socket in /tmp.
   */
  @Test
  void aKilledJvmThatSomethingAttachedToLeavesNoSocket() throws Exception {
    String javaBin = Path.of(System.getProperty("java.home"), "bin").toString();
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(javaBin, "java").toString());
    cmd.add("-Xshare:auto");
    cmd.add("-cp");
    cmd.add(String.join(java.io.File.pathSeparator, ChildJvm.classPath()));
    cmd.add(Idle.class.getName());
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    try {
      BufferedReader out =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      assertThat(out.readLine()).isEqualTo("up");
      Process jcmd =
          new ProcessBuilder(
                  Path.of(javaBin, "jcmd").toString(), Long.toString(p.pid()), "VM.uptime")
              .redirectErrorStream(true)
              .start();
      String said = new String(jcmd.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(jcmd.waitFor()).as(said).isZero();
      Path socket = ChildJvm.attachSocket(p.pid());
      assertThat(socket).exists();

      ChildJvm.kill(p);

      assertThat(p.isAlive()).isFalse();
      assertThat(Files.exists(socket)).isFalse();
    } finally {
      p.destroyForcibly();
    }
  }
}
