package io.oneshot.provisionerd;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/**
 * The API for a provisionerd whose sandbox has no network of its own but loopback ({@code
 * launcher.local.network: none}): the dispatcher relays a Unix socket in the attempt's directory to
 * its API, and this listens on the sandbox's loopback and carries each connection to that socket,
 * since the runner's HTTP client speaks TCP. The sandbox's loopback is its own: nothing outside it
 * reaches this port.
 */
public final class SocketBridge implements AutoCloseable {
  private final ServerSocketChannel server;
  private final Path socket;

  private SocketBridge(ServerSocketChannel server, Path socket) {
    this.server = server;
    this.socket = socket;
  }

  /** Listens on a free loopback port and relays each connection to {@code socket}. */
  public static SocketBridge open(Path socket) throws IOException {
    ServerSocketChannel server = ServerSocketChannel.open();
    server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
    SocketBridge bridge = new SocketBridge(server, socket);
    Thread.ofVirtual().name("oneshot-api-bridge").start(bridge::accept);
    return bridge;
  }

  /** {@code api} with its host and port replaced by this bridge's (its path kept). */
  public URI through(URI api) {
    int port = ((InetSocketAddress) localAddress()).getPort();
    return URI.create(
        "http://127.0.0.1:"
            + port
            + (api.getRawPath() == null ? "" : api.getRawPath())
            + (api.getRawQuery() == null ? "" : "?" + api.getRawQuery()));
  }

  private java.net.SocketAddress localAddress() {
    try {
      return server.getLocalAddress();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private void accept() {
    while (server.isOpen()) {
      try {
        SocketChannel in = server.accept();
        Thread.ofVirtual().start(() -> relay(in));
      } catch (IOException e) {
        return;
      }
    }
  }

  private void relay(SocketChannel in) {
    try (in;
        SocketChannel out = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      out.connect(UnixDomainSocketAddress.of(socket));
      Thread back = Thread.ofVirtual().start(() -> copy(out, in));
      copy(in, out);
      back.join();
    } catch (IOException e) {
      // the caller sees its connection closed, and its retry opens another
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Copies {@code from} to {@code to} until its end, then half-closes {@code to}. */
  public static void copy(SocketChannel from, SocketChannel to) {
    ByteBuffer buf = ByteBuffer.allocate(16 * 1024);
    try {
      while (from.read(buf) >= 0) {
        buf.flip();
        while (buf.hasRemaining()) {
          to.write(buf);
        }
        buf.clear();
      }
      to.shutdownOutput();
    } catch (IOException e) {
      try {
        from.close();
        to.close();
      } catch (IOException ignored) {
        // closing what already failed
      }
    }
  }

  @Override
  public void close() throws IOException {
    server.close();
  }
}
