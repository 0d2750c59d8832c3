package io.oneshot.testing;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
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
  static final Path RANGE = Path.of("/proc/sys/net/ipv4/ip_local_port_range");

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

  /**
   * The kernel's ephemeral port range (Linux), else one that starts where Linux's default range
   * does (below IANA's, 49152). Read as a stream: the sysctl file answers only the first read of an
   * open file, and {@code Files.readString} read one byte of it ("3") on Linux 6.18, so that the
   * IANA range was assumed and ports up to 49151 picked, inside the kernel's 32768-60999: a
   * dispatcher the footprint benchmark started on one found it already in use (2026-11-28).
   */
  static int[] ephemeralRange() {
    try (InputStream in = Files.newInputStream(RANGE)) {
      String[] r = new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+");
      return new int[] {Integer.parseInt(r[0]), Integer.parseInt(r[1])};
    } catch (IOException | RuntimeException e) {
      return new int[] {32768, 65535};
    }
  }
}
