package io.oneshot.testing.k8s;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesMixedDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.MockWebServerListener;
import io.fabric8.mockwebserver.ServerRequest;
import io.fabric8.mockwebserver.ServerResponse;
import io.fabric8.mockwebserver.http.RecordedHttpConnection;
import io.oneshot.testing.TempDirs;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * A Kubernetes API server for tests: fabric8's mock server in CRUD mode (real HTTP, real watches,
 * no controllers), behind a {@link FaultyDispatcher}, with a {@link FakeKubelet} doing the work of
 * the Job controller and the kubelet for the given namespaces.
 */
public final class MockCluster implements AutoCloseable {
  public final FaultyDispatcher dispatcher;
  public final KubernetesMockServer server;
  public final KubernetesClient admin;
  public final FakeKubelet kubelet;

  /** The API server's ServiceAccount tokens: the kubelet's for pods, and their reviews. */
  public final ServiceAccountTokens tokens;

  /** The clients' ends of the connections open to the API server. */
  private final Set<String> connections = new HashSet<>();

  /** The kubelet's work directory when this cluster made it (and deletes it at its close). */
  private final Path ownWorkRoot;

  /** A cluster whose kubelet works in {@code workRoot}, which the caller made and removes. */
  public MockCluster(List<String> namespaces, Path workRoot) {
    this(namespaces, workRoot, false);
  }

  /**
   * A cluster whose kubelet works in a temporary directory of its own, deleted at its close (for
   * the benchmark, which has no test's temporary directory).
   */
  public static MockCluster inTemporaryDirectory(List<String> namespaces) {
    return new MockCluster(namespaces, TempDirs.make("oneshot-kubelet"), true);
  }

  private MockCluster(List<String> namespaces, Path workRoot, boolean own) {
    ownWorkRoot = own ? workRoot : null;
    Map<ServerRequest, Queue<ServerResponse>> responses = new HashMap<>();
    dispatcher = new FaultyDispatcher(new KubernetesMixedDispatcher(responses));
    MockWebServer web = new MockWebServer();
    web.addListener(
        new MockWebServerListener() {
          @Override
          public void onConnection(RecordedHttpConnection c) {
            synchronized (connections) {
              connections.add(c.getRemoteAddress().toString());
            }
          }

          @Override
          public void onConnectionClosed(RecordedHttpConnection c) {
            synchronized (connections) {
              connections.remove(c.getRemoteAddress().toString());
              connections.notifyAll();
            }
          }
        });
    server =
        new KubernetesMockServer(new Context(), web, responses, dispatcher, false) {
          @Override
          protected Config initConfig() {
            Config c = super.initConfig();
            c.setRequestRetryBackoffLimit(0);
            c.setRequestTimeout(3_000);
            return c;
          }
        };
    server.init();
    admin = server.createClient();
    tokens = new ServiceAccountTokens();
    dispatcher.tokenReviews(tokens);
    kubelet = new FakeKubelet(admin, dispatcher, namespaces, workRoot, tokens);
    kubelet.start();
  }

  /** The User-Agent of {@link #clientFor}'s requests. */
  public static final String DISPATCHER_AGENT = "oneshot-dispatcher-under-test";

  /**
   * A client as the dispatcher gets one: on its Vert.x, with fabric8's own retries off, and a
   * User-Agent of its own ({@link #DISPATCHER_AGENT}).
   */
  public KubernetesClient clientFor(Vertx vertx) {
    return clientFor(vertx, UnaryOperator.identity());
  }

  /** {@link #clientFor}, its configuration changed by {@code adjust}. */
  public KubernetesClient clientFor(
      Vertx vertx, UnaryOperator<io.fabric8.kubernetes.client.ConfigBuilder> adjust) {
    Config config =
        adjust
            .apply(
                new io.fabric8.kubernetes.client.ConfigBuilder(admin.getConfiguration())
                    .withUserAgent(DISPATCHER_AGENT))
            .build();
    return server.createClient(
        b -> b.withConfig(config).withHttpClientFactory(new VertxHttpClientFactory(vertx)));
  }

  /** {@link #clientFor}, reaching the API server through {@code proxy} (which can cut it off). */
  public KubernetesClient clientThrough(Vertx vertx, io.oneshot.testing.TcpProxy proxy) {
    Config config =
        new io.fabric8.kubernetes.client.ConfigBuilder(admin.getConfiguration())
            .withUserAgent(DISPATCHER_AGENT)
            .withMasterUrl("http://127.0.0.1:" + proxy.port() + "/")
            .build();
    return server.createClient(
        b -> b.withConfig(config).withHttpClientFactory(new VertxHttpClientFactory(vertx)));
  }

  /** Where the API server listens (for a proxy in front of it). */
  public java.net.InetSocketAddress address() {
    return new java.net.InetSocketAddress("127.0.0.1", server.getPort());
  }

  /**
   * The dispatcher's calls so far, as RBAC sees them: "group/resource verb" ("batch/jobs create").
   */
  public java.util.Set<String> dispatcherAccess() {
    java.util.Set<String> out = new java.util.TreeSet<>();
    for (FaultyDispatcher.Request r : dispatcher.requests) {
      if (DISPATCHER_AGENT.equals(r.userAgent())) {
        out.add(Rbac.access(r.method(), r.path()));
      }
    }
    return out;
  }

  /**
   * Stops the kubelet, then the API server once every client has hung up. The server closes a
   * WebSocket (a watch) by handshake and gives the client ten seconds to answer, the same time
   * fabric8 waits for the whole close: a watch still open then can fail the close. So the clients
   * go first (the dispatcher's before this is called, the kubelet's here) and the server closes
   * with no connection left; one that stays open is named.
   */
  @Override
  public void close() {
    try {
      kubelet.close();
      admin.close();
      List<String> left = awaitNoConnections(Duration.ofSeconds(20));
      try {
        server.destroy();
      } catch (IllegalStateException e) {
        throw new IllegalStateException(
            e.getMessage() + "; connections still open when it closed: " + left, e);
      }
    } finally {
      TempDirs.delete(ownWorkRoot);
    }
  }

  private List<String> awaitNoConnections(Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    synchronized (connections) {
      try {
        long rest;
        while (!connections.isEmpty() && (rest = deadline - System.nanoTime()) > 0) {
          TimeUnit.NANOSECONDS.timedWait(connections, rest);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return List.copyOf(connections);
    }
  }
}
