package io.oneshot.bench;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.kubernetes.KubernetesLauncher;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.util.List;
import java.util.function.BiFunction;

/** The dispatchers the scenarios measure: production defaults unless a case says otherwise. */
final class Setups {
  private Setups() {}

  /** The route every benchmark server has, and its builds go to. */
  static final String ROUTE = "bench";

  /** One route without tags and without a practical limit: nothing but the dispatcher waits. */
  static final String OPEN_ROUTE = "routes: [{name: " + ROUTE + ", maxConcurrent: 100000}]";

  /** Builds one claim may take: 1,000 (the default, 100, is the default global limit). */
  static final int CLAIM_BATCH = Integer.getInteger("bench.claimBatch", 1_000);

  /** The defaults of dispatch, with the global limit out of the way and claims of CLAIM_BATCH. */
  static final String DISPATCH =
      "maxConcurrent: 100000, claimBatch: "
          + CLAIM_BATCH
          + ", pollInterval: 2s, rescueInterval: 5s, heartbeatInterval: 1s";

  static TestServer.Builder noop(TimedLauncher launcher) {
    return TestServer.with().routes(OPEN_ROUTE).dispatch(DISPATCH).launcher(launcher);
  }

  /**
   * A Kubernetes API server (fabric8's mock, CRUD mode) that nobody runs pods for: each launch is
   * its real API calls (Secret, Job, owner patch) and nothing else.
   */
  static MockCluster cluster() {
    return MockCluster.inTemporaryDirectory(List.of());
  }

  /**
   * The Kubernetes launcher against {@code cluster}; {@code settings} are added to its {@code
   * launcher.kubernetes} section (empty: the defaults).
   */
  static TestServer.Builder kubernetes(MockCluster cluster, String settings, TimedLauncher[] made) {
    return kubernetes(
        (vertx, config) -> cluster.clientFor(vertx),
        ROUTE,
        Path.of("job-templates"),
        settings,
        made);
  }

  /** The Kubernetes launcher against {@code api}'s server, in its namespace, with its templates. */
  static TestServer.Builder kubernetes(LaunchBench.Api api, String settings, TimedLauncher[] made) {
    return kubernetes(api::dispatcherClient, api.namespace(), api.templateDir(), settings, made);
  }

  /**
   * The Kubernetes launcher with the client {@code api} makes on the server's Vert.x for its
   * configuration, launching into {@code namespace} from the templates in {@code templateDir}.
   */
  static TestServer.Builder kubernetes(
      BiFunction<Vertx, OneshotConfig, KubernetesClient> api,
      String namespace,
      Path templateDir,
      String settings,
      TimedLauncher[] made) {
    return TestServer.with()
        .routes(
            "routes: [{name: %s, template: script.yaml, namespace: %s, maxConcurrent: 100000}]"
                .formatted(ROUTE, namespace))
        .dispatch(DISPATCH)
        // Pods never run here, so they need no reachable API.
        .api(
            "{listen: \"127.0.0.1:0\", publicUrl: \"http://127.0.0.1:9\", adminToken: \"%s\"}"
                .formatted(TestServer.ADMIN_TOKEN))
        .launcherYaml(
            "{kind: kubernetes, kubernetes: {namespace: %s, templateDir: \"%s\"%s}}"
                .formatted(namespace, templateDir, settings.isEmpty() ? "" : ", " + settings))
        .launchers(
            (vertx, cfg) -> {
              made[0] = new TimedLauncher(KubernetesLauncher.create(cfg, api.apply(vertx, cfg)));
              return made[0];
            });
  }

  /** The client-side rate limit at {@code qps} and {@code burst}. */
  static String rate(int qps, int burst) {
    return "qps: %d, burst: %d".formatted(qps, burst);
  }
}
