package io.oneshot.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP proxy in front of the test PostgreSQL, for faults: {@link #cut()} drops every connection
 * and refuses new ones; {@link #freeze()} keeps connections open but stops moving bytes (a network
 * partition); {@link #restore()} ends either. With several targets it stands for a Kubernetes
 * Service: each connection goes to the next target that accepts it (round robin).
 */
public final class TcpProxy implements AutoCloseable {
  private final ServerSocket server;
  private volatile java.util.function.Supplier<List<InetSocketAddress>> targets;
  private final java.util.concurrent.atomic.AtomicInteger next =
      new java.util.concurrent.atomic.AtomicInteger();
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();

  /** For each connection forwarded: its upstream side's local port -> its client's port. */
  private final java.util.Map<Integer, Integer> clients =
      new java.util.concurrent.ConcurrentHashMap<>();

  private volatile boolean cut;
  private volatile boolean frozen;
  private final Object gate = new Object();

  public TcpProxy(String targetHost, int targetPort) {
    this(List.of(new InetSocketAddress(targetHost, targetPort)));
  }

  public TcpProxy(List<InetSocketAddress> targets) {
    this(() -> targets);
  }

  /** A proxy to whatever {@code targets} names when a connection arrives (servers that move). */
  public TcpProxy(java.util.function.Supplier<List<InetSocketAddress>> targets) {
    this.targets = targets;
    try {
      server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Thread.ofPlatform().daemon().name("proxy-accept").start(this::accept);
  }

  /** Sends new connections to {@code host:port} (a server that started after the proxy). */
  public void target(String host, int port) {
    List<InetSocketAddress> to = List.of(new InetSocketAddress(host, port));
    targets = () -> to;
  }

  /** A proxy for the test database; {@link #url()} is its URL through the proxy. */
  public static TcpProxy forTestDatabase() {
    URI u = URI.create(TestDatabase.url());
    return new TcpProxy(u.getHost(), u.getPort());
  }

  public String url() {
    URI u = URI.create(TestDatabase.url());
    return "postgresql://" + u.getUserInfo() + "@127.0.0.1:" + server.getLocalPort() + u.getPath();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket client = server.accept();
        if (cut) {
          client.close();
          continue;
        }
        Socket upstream = connectUpstream();
        if (upstream == null) {
          client.close();
          continue;
        }
        sockets.add(client);
        sockets.add(upstream);
        clients.put(upstream.getLocalPort(), client.getPort());
        record(upstream.getLocalPort(), client.getPort());
        pipe(client, upstream);
        pipe(upstream, client);
      } catch (IOException e) {
        // closed, or the target refused: the client sees its connection drop
      }
    }
  }

  /** The next target that accepts a connection, or null when none does. */
  private Socket connectUpstream() {
    int start = next.getAndIncrement();
    List<InetSocketAddress> to = targets.get();
    for (int i = 0; i < to.size(); i++) {
      Socket upstream = new Socket();
      try {
        upstream.connect(to.get(Math.floorMod(start + i, to.size())), 2000);
        return upstream;
      } catch (IOException e) {
        close(upstream);
      }
    }
    return null;
  }

  /**
   * The port of the client whose connection the proxy forwards from its own port {@code
   * upstreamPort}; empty when it forwards none from there.
   */
  public java.util.OptionalInt clientPortFor(int upstreamPort) {
    Integer c = clients.get(upstreamPort);
    return c == null ? java.util.OptionalInt.empty() : java.util.OptionalInt.of(c);
  }

  /**
   * Where the proxies write what they forward, one file each ({@code <upstream port> <client port>
   * <proxy port>} a line), for a dispatcher in another process to prove the runners behind them
   * ({@link ProxiedDispatcher}).
   */
  public static final Path FORWARDS =
      Path.of(System.getProperty("java.io.tmpdir"), "oneshot-test-forwards");

  private void record(int upstream, int client) {
    try {
      Files.createDirectories(FORWARDS);
      Files.writeString(
          FORWARDS.resolve(server.getLocalPort() + ".map"),
          upstream + " " + client + " " + server.getLocalPort() + "\n",
          java.nio.charset.StandardCharsets.UTF_8,
          java.nio.file.StandardOpenOption.CREATE,
          java.nio.file.StandardOpenOption.APPEND);
    } catch (IOException e) {
      // a dispatcher of this JVM proves through clientPortFor instead
    }
  }

  /** The port the proxy listens on (127.0.0.1). */
  public int port() {
    return server.getLocalPort();
  }

  private void pipe(Socket from, Socket to) {
    Thread.ofPlatform()
        .daemon()
        .name("proxy-pipe")
        .start(
            () -> {
              byte[] buf = new byte[16384];
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                  synchronized (gate) {
                    while (frozen) {
                      gate.wait();
                    }
                  }
                  out.write(buf, 0, n);
                  out.flush();
                }
              } catch (IOException | InterruptedException e) {
                // the other side closed
              } finally {
                close(from);
                close(to);
              }
            });
  }

  /** Drops every connection and refuses new ones until {@link #restore()}. */
  public void cut() {
    cut = true;
    for (Socket s : sockets) {
      close(s);
    }
    sockets.clear();
  }

  /** Stops forwarding bytes; connections stay open. */
  public void freeze() {
    frozen = true;
  }

  public void restore() {
    cut = false;
    synchronized (gate) {
      frozen = false;
      gate.notifyAll();
    }
  }

  private static void close(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // already closed
    }
  }

  @Override
  public void close() {
    restore();
    cut();
    int port = server.getLocalPort();
    close(server);
    try {
      Files.deleteIfExists(FORWARDS.resolve(port + ".map"));
    } catch (IOException e) {
      // left for the next proxy on this port to append to; harmless
    }
  }

  private static void close(ServerSocket s) {
    try {
      s.close();
    } catch (IOException e) {
      // already closed
    }
  }
}
