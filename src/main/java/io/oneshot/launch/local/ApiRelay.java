package io.oneshot.launch.local;

import io.oneshot.launch.AttemptRef;
import io.oneshot.provisionerd.SocketBridge;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The oneshot API, carried into attempts that have no network of their own ({@code
 * launcher.local.network: none}): each such attempt gets a Unix socket in its own directory ({@link
 * #SOCKET}), which only its sandbox has mounted, and every connection made to it is relayed to the
 * API's TCP address from this process. A connection the relay made is the proof of the attempt it
 * came from ({@link #attemptOf}): nothing outside that attempt's sandbox (and this dispatcher's own
 * user) can reach its socket.
 *
 * <p>Inside the sandbox, provisionerd listens on its own loopback (a network namespace with nothing
 * else) and relays to the socket ({@code ProvisionerdCommand}, {@code ONESHOT_API_SOCKET}), since
 * its HTTP client speaks TCP. Blocking I/O on virtual threads: a relayed connection is two copies
 * and nothing else, never on an event loop.
 */
final class ApiRelay implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ApiRelay.class);

  /** The socket's name in the attempt's directory. */
  static final String SOCKET = "api.sock";

  private final Map<String, ServerSocketChannel> listening = new ConcurrentHashMap<>();

  /** The attempt each relayed connection speaks for, by the local port of its TCP side. */
  private final Map<Integer, AttemptRef> byPort = new ConcurrentHashMap<>();

  /**
   * Listens on the attempt's socket (made again when a socket of an earlier dispatcher is there)
   * and relays each connection to {@code apiUrl}'s host and port.
   */
  void listen(AttemptRef ref, Path dir, String apiUrl) throws IOException {
    if (listening.containsKey(ref.name())) {
      return;
    }
    URI api = URI.create(apiUrl);
    InetSocketAddress target =
        new InetSocketAddress(api.getHost(), api.getPort() > 0 ? api.getPort() : 80);
    Path socket = dir.resolve(SOCKET);
    Files.deleteIfExists(socket);
    ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    server.bind(UnixDomainSocketAddress.of(socket));
    if (listening.putIfAbsent(ref.name(), server) != null) {
      server.close();
      return;
    }
    Thread.ofVirtual()
        .name("oneshot-api-relay-" + ref.name())
        .start(
            () -> {
              while (server.isOpen()) {
                try {
                  SocketChannel in = server.accept();
                  Thread.ofVirtual().start(() -> relay(ref, in, target));
                } catch (IOException e) {
                  if (server.isOpen()) {
                    log.debug(
                        "Attempt {}: the API relay stopped accepting: {}.", ref, e.toString());
                  }
                  return;
                }
              }
            });
  }

  private void relay(AttemptRef ref, SocketChannel in, InetSocketAddress target) {
    try (in;
        SocketChannel out = SocketChannel.open()) {
      // Bound first, so that the port is known to speak for the attempt before a byte is sent.
      out.bind(new InetSocketAddress(target.getAddress(), 0));
      int port = ((InetSocketAddress) out.getLocalAddress()).getPort();
      byPort.put(port, ref);
      try {
        out.connect(target);
        Thread back = Thread.ofVirtual().start(() -> SocketBridge.copy(out, in));
        SocketBridge.copy(in, out);
        back.join();
      } finally {
        // Forgotten before the socket closes: a port used again by someone else is not the attempt.
        byPort.remove(port, ref);
      }
    } catch (IOException e) {
      log.debug("Attempt {}: a relayed API connection ended: {}.", ref, e.toString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The attempt a connection from this local port was relayed for, if the relay made it. */
  Optional<AttemptRef> attemptOf(int port) {
    return Optional.ofNullable(byPort.get(port));
  }

  /** Stops listening for the attempt (its relayed connections end with it). */
  void forget(AttemptRef ref) {
    forget(ref.name());
  }

  private void forget(String name) {
    ServerSocketChannel s = listening.remove(name);
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        log.debug("Attempt {}: closing the API relay: {}.", name, e.toString());
      }
    }
  }

  @Override
  public void close() {
    listening.keySet().forEach(this::forget);
  }
}
