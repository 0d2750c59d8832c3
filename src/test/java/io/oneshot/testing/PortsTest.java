package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.junit.jupiter.api.Test;

/** A stable port is one no outgoing connection can take between a server's stop and restart. */
class PortsTest {
  @Test
  void aStablePortIsNeverOneTheKernelHandsToOutgoingConnections() throws Exception {
    assumeTrue(Files.isReadable(Ports.RANGE), "Linux /proc");
    // The kernel's range as cat reads it, not as the code under test does.
    Process cat = new ProcessBuilder("cat", Ports.RANGE.toString()).start();
    String[] range =
        new String(cat.getInputStream().readAllBytes(), StandardCharsets.US_ASCII)
            .trim()
            .split("\\s+");
    assertThat(cat.waitFor()).isZero();
    int low = Integer.parseInt(range[0]);
    int high = Integer.parseInt(range[1]);

    assertThat(Ports.ephemeralRange()).containsExactly(low, high);
    for (int i = 0; i < 500; i++) {
      int port = Ports.stable();
      assertThat(port < low || port > high)
          .as("port %d outside the ephemeral range %d-%d", port, low, high)
          .isTrue();
    }
  }
}
