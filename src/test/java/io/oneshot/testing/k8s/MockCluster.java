package io.oneshot.testing.k8s;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesMixedDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.ServerRequest;
import io.fabric8.mockwebserver.ServerResponse;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;

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

  public MockCluster(List<String> namespaces, Path workRoot) {
    Map<ServerRequest, Queue<ServerResponse>> responses = new HashMap<>();
    dispatcher = new FaultyDispatcher(new KubernetesMixedDispatcher(responses));
    server =
        new KubernetesMockServer(new Context(), new MockWebServer(), responses, dispatcher, false) {
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
    kubelet = new FakeKubelet(admin, dispatcher, namespaces, workRoot);
    kubelet.start();
  }

  /** The User-Agent of {@link #clientFor}'s requests. */
  public static final String DISPATCHER_AGENT = "oneshot-dispatcher-under-test";

  /**
   * A client as the dispatcher gets one: on its Vert.x, with fabric8's own retries off, and a
   * User-Agent of its own ({@link #DISPATCHER_AGENT}).
   */
  public KubernetesClient clientFor(Vertx vertx) {
    Config config =
        new io.fabric8.kubernetes.client.ConfigBuilder(admin.getConfiguration())
            .withUserAgent(DISPATCHER_AGENT)
            .build();
    return server.createClient(
        b -> b.withConfig(config).withHttpClientFactory(new VertxHttpClientFactory(vertx)));
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

  @Override
  public void close() {
    kubelet.close();
    admin.close();
    server.destroy();
  }
}
