package io.oneshot.process;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PortOwnerTest {
  @Test
  void aListeningSocketOfThePortIsFoundInBothTablesShapes() {
    List<String> table =
        List.of(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
                + "  timeout inode",
            "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000"
                + "        0 4242 1 0000000000000000 100 0 0 10 0",
            // The same port, connected rather than listening: not a listener.
            "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000"
                + "        0 4343 1 0000000000000000 20 4 30 10 -1",
            "   2: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A"
                + " 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0 100 0 0 10 0",
            "   3: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000"
                + "        0 4545 1 0000000000000000 100 0 0 10 0");
    assertThat(PortOwner.listeners(table, 0x1F90)).containsExactlyInAnyOrder("4242", "4444");
    assertThat(PortOwner.listeners(table, 0x1F92)).isEmpty();
  }

  @Test
  void thisProcessAnotherOneAndNobodyAreToldApart() throws Exception {
    assumeTrue(Files.isReadable(Path.of("/proc/net/tcp")), "Linux /proc");
    PortOwner owner = new PortOwner();
    int port;
    try (ServerSocket mine = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = mine.getLocalPort();
      assertThat(owner.of(ProcessHandle.current(), port)).isEqualTo(PortOwner.Owner.THIS_TREE);
      // A child that listens on nothing: the port is someone else's as seen from it.
      Process child = new ProcessBuilder("sleep", "60").start();
      try {
        assertThat(owner.of(child.toHandle(), port)).isEqualTo(PortOwner.Owner.ANOTHER);
      } finally {
        child.destroyForcibly().waitFor();
      }
    }
    assertThat(owner.of(ProcessHandle.current(), port)).isEqualTo(PortOwner.Owner.NOBODY);
  }

  @Test
  void withoutProcItCannotBeTold(@TempDir Path empty) {
    assertThat(new PortOwner(empty).of(ProcessHandle.current(), 8080))
        .isEqualTo(PortOwner.Owner.UNKNOWN);
  }
}
