package io.oneshot.bench;

import static io.oneshot.launch.kubernetes.LaunchObjects.MANAGED_BY;
import static io.oneshot.launch.kubernetes.LaunchObjects.MANAGER;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.kubernetes.KubernetesLauncher;
import io.oneshot.testing.TempDirs;
import io.vertx.core.Vertx;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * A real Kubernetes API server, named by a kubeconfig ({@code scripts/bench --kubeconfig}), that
 * the launch scenario measures against beside its mock and echo servers: the same burst, the same
 * plain fabric8 client, the same requests in flight, with a real API server's admission, etcd and
 * priority and fairness in the way.
 *
 * <p>Every Job it makes is created suspended ({@code spec.suspend: true}), so that no pod runs and
 * the cluster's only work is the API server's; each run ends by deleting what it made, and waits
 * until it is gone, so the next run starts on the same empty namespace (and may reuse the Jobs'
 * names). It deletes by the label the launcher puts on everything it makes ({@code
 * app.kubernetes.io/managed-by=oneshot}), and so refuses a namespace that holds any such object
 * before it starts: use a namespace of its own. The account needs, in that namespace: create, list,
 * watch and deletecollection on Jobs; create, patch, list and deletecollection on Secrets; list and
 * watch on Pods.
 */
final class RealApi {
  /** How long a clean-up may take before the scenario gives up. */
  static final Duration CLEAN_UP = Duration.ofMinutes(10);

  private final Duration cleanUpLimit;

  private final Config found;
  final String namespace;
  final Path templateDir;

  /** Launches in each run, per side. */
  final int launches;

  private final KubernetesClient admin;

  /**
   * Reads the kubeconfig ({@code context} null: its current context), makes the suspended Job
   * templates, and checks that the namespace holds nothing of the launcher's.
   */
  RealApi(Path kubeconfig, String context, String namespace, int launches) {
    this(kubeconfig, context, namespace, launches, CLEAN_UP);
  }

  /** As above, a clean-up given up after {@code cleanUpLimit}. */
  RealApi(Path kubeconfig, String context, String namespace, int launches, Duration cleanUpLimit) {
    if (!Files.isReadable(kubeconfig)) {
      throw new IllegalArgumentException("--kubeconfig: cannot read " + kubeconfig);
    }
    this.found = Config.fromKubeconfig(context, kubeconfig.toFile());
    this.namespace = namespace;
    this.launches = launches;
    this.cleanUpLimit = cleanUpLimit;
    this.templateDir = suspendedTemplates();
    this.admin = plainClient(null);
    List<String> left = leftovers();
    if (!left.isEmpty()) {
      close();
      throw new IllegalStateException(
          "namespace "
              + namespace
              + " already holds what oneshot makes ("
              + String.join(", ", left.subList(0, Math.min(5, left.size())))
              + (left.size() > 5 ? ", ..." : "")
              + "); the benchmark deletes what it made by the label "
              + MANAGED_BY
              + "="
              + MANAGER
              + ", so it needs a namespace of its own (--namespace)");
    }
  }

  /** Where the API server is, for the report. */
  String describe() {
    return "API server at " + found.getMasterUrl().replaceAll("/$", "");
  }

  /**
   * A plain fabric8 client to the server, with fabric8's defaults (its own retries included, so an
   * answer 429 from priority and fairness is waited out as any plain client would); on {@code
   * vertx}'s event loops when given.
   */
  KubernetesClient plainClient(Vertx vertx) {
    KubernetesClientBuilder b = new KubernetesClientBuilder().withConfig(found);
    if (vertx != null) {
      b.withHttpClientFactory(new VertxHttpClientFactory(vertx));
    }
    return b.build();
  }

  /** The client a dispatcher configured with {@code config} makes for this server. */
  KubernetesClient dispatcherClient(Vertx vertx, OneshotConfig config) {
    return KubernetesLauncher.client(vertx, found, config);
  }

  /** One run's server: its clients, and at its close the namespace emptied of what it made. */
  LaunchBench.Api run() {
    return new LaunchBench.Api() {
      @Override
      public KubernetesClient clientFor(Vertx vertx) {
        return plainClient(vertx);
      }

      @Override
      public KubernetesClient dispatcherClient(Vertx vertx, OneshotConfig config) {
        return RealApi.this.dispatcherClient(vertx, config);
      }

      @Override
      public String namespace() {
        return namespace;
      }

      @Override
      public Path templateDir() {
        return templateDir;
      }

      @Override
      public boolean serverInProcess() {
        return false;
      }

      @Override
      public void close() {
        cleanUp();
      }
    };
  }

  /**
   * Deletes every Job and Secret of the launcher's in the namespace (one request each), then waits
   * until none is listed.
   */
  void cleanUp() {
    admin.batch().v1().jobs().inNamespace(namespace).withLabel(MANAGED_BY, MANAGER).delete();
    admin.secrets().inNamespace(namespace).withLabel(MANAGED_BY, MANAGER).delete();
    long deadline = System.nanoTime() + cleanUpLimit.toNanos();
    long said = System.nanoTime();
    List<String> left;
    while (!(left = leftovers()).isEmpty()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            left.size() + " objects still in " + namespace + " after " + cleanUpLimit);
      }
      if (System.nanoTime() - said > Duration.ofSeconds(10).toNanos()) {
        System.out.printf("   waiting for %,d objects in %s to go%n", left.size(), namespace);
        said = System.nanoTime();
      }
      try {
        Thread.sleep(200);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while cleaning up " + namespace, e);
      }
    }
  }

  /** Closes the client of the clean-up. */
  void close() {
    try {
      admin.close();
    } finally {
      TempDirs.delete(templateDir);
    }
  }

  /** The Jobs and Secrets of the launcher's in the namespace, by kind and name. */
  private List<String> leftovers() {
    List<HasMetadata> all = new java.util.ArrayList<>();
    all.addAll(
        admin
            .batch()
            .v1()
            .jobs()
            .inNamespace(namespace)
            .withLabel(MANAGED_BY, MANAGER)
            .list()
            .getItems());
    all.addAll(
        admin.secrets().inNamespace(namespace).withLabel(MANAGED_BY, MANAGER).list().getItems());
    return all.stream().map(o -> o.getKind() + "/" + o.getMetadata().getName()).toList();
  }

  /**
   * The shipped templates (job-templates), each with {@code spec.suspend: true}: the API server
   * admits and stores the Job, and no controller starts a pod for it.
   */
  private static Path suspendedTemplates() {
    try {
      Path dir = TempDirs.make("oneshot-bench-suspended");
      var yaml =
          new com.fasterxml.jackson.databind.ObjectMapper(
              new com.fasterxml.jackson.dataformat.yaml.YAMLFactory());
      try (var files = Files.list(Path.of("job-templates"))) {
        for (Path f : files.filter(p -> p.toString().endsWith(".yaml")).toList()) {
          ObjectNode job = (ObjectNode) yaml.readTree(f.toFile());
          ((ObjectNode) job.path("spec")).put("suspend", true);
          yaml.writeValue(new File(dir.toFile(), f.getFileName().toString()), job);
        }
      }
      return dir;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
