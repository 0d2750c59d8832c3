package io.oneshot.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Ports for servers a test stops and starts again on the same address (what their clients were
 * told). A port picked with {@code new ServerSocket(0)} comes from the kernel's ephemeral range,
 * which every outgoing connection also draws its source port from: between a stop and the restart,
 * any connection on the machine may take it. These come from below that range, where only a server
 * that asks for the port by number can take it, and were free when picked.
 */
public final class Ports {
  private Ports() {}

  public static int stable() {
    int[] ephemeral = ephemeralRange();
    int low = ephemeral[0] > 20000 ? 10000 : ephemeral[1] + 1;
    int high = ephemeral[0] > 20000 ? ephemeral[0] - 1 : 65535;
    for (int i = 0; i < 200; i++) {
      int port = ThreadLocalRandom.current().nextInt(low, high + 1);
      try (ServerSocket s = new ServerSocket()) {
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        return port;
      } catch (IOException e) {
        // taken: try another
      }
    }
    throw new IllegalStateException("no free port in " + low + "-" + high);
  }

  /** The kernel's ephemeral port range (Linux), else the IANA one. */
  private static int[] ephemeralRange() {
    try {
      String[] r =
          Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).trim().split("\\s+");
      return new int[] {Integer.parseInt(r[0]), Integer.parseInt(r[1])};
    } catch (IOException | RuntimeException e) {
      return new int[] {49152, 65535};
    }
  }
}
