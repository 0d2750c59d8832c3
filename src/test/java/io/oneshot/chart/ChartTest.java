package io.oneshot.chart;

import static io.oneshot.testing.Chart.render;
import static io.oneshot.testing.Chart.tree;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.networking.v1.Ingress;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.kubernetes.JobTemplates;
import io.oneshot.testing.Chart;
import io.oneshot.testing.KubeSchema;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The Helm chart rendered by Helm itself (helm-java ships it as a native library), offline: every
 * object parses as its Kubernetes kind, RBAC grants exactly what the dispatcher uses, build pods
 * get an account with no permissions, and the configuration the chart writes loads through the
 * dispatcher's own loader.
 */
class ChartTest {
  private static final Path CHART = Chart.DIR;
  private static final Path ORGS = CHART.resolve("examples/organisations.yaml");
  private static final Path CLUSTERS = CHART.resolve("examples/clusters.yaml");
  private static final Path GPU = CHART.resolve("examples/gpu.yaml");
  private static final Path OWN_IMAGE = CHART.resolve("examples/own-image.yaml");
  private static final Path CODER = CHART.resolve("examples/coder.yaml");
  private static final KubernetesSerialization K8S = new KubernetesSerialization();
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  /**
   * What the dispatcher calls on the API server, by resource (KubernetesLauncher; checked against
   * its real calls by KubernetesLauncherTest).
   */
  private static final Set<String> DISPATCHER_VERBS =
      Set.of(
          "batch/jobs create",
          "batch/jobs get",
          "batch/jobs list",
          "batch/jobs watch",
          "batch/jobs delete",
          "/pods get",
          "/pods list",
          "/pods watch",
          "/pods delete",
          "/secrets create",
          "/secrets list",
          "/secrets patch",
          "/secrets delete",
          "/events list",
          "/events watch",
          "apps/deployments create",
          "apps/deployments list",
          "apps/deployments watch",
          "apps/deployments update",
          "apps/deployments patch",
          "apps/deployments delete");

  @TempDir Path tmp;

  private static <T extends HasMetadata> List<T> all(List<HasMetadata> objs, Class<T> kind) {
    return objs.stream().filter(kind::isInstance).map(kind::cast).toList();
  }

  private static <T extends HasMetadata> T one(List<HasMetadata> objs, Class<T> kind, String name) {
    return all(objs, kind).stream()
        .filter(o -> o.getMetadata().getName().equals(name))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no " + kind.getSimpleName() + " " + name));
  }

  private static Set<String> kinds(List<HasMetadata> objs) {
    return objs.stream().map(HasMetadata::getKind).collect(Collectors.toCollection(TreeSet::new));
  }

  @Test
  void helmLintPassesAndEveryExampleRenders() {
    LintResult r = new Helm(CHART).lint().strict().call();
    assertThat(r.isFailed()).as(String.join("\n", r.getMessages())).isFalse();
    // helm lint takes no values file here; rendering each example parses every object it makes.
    for (Path values : List.of(ORGS, GPU, OWN_IMAGE, CODER, CLUSTERS)) {
      assertThat(render(t -> t.withValuesFile(values))).as(values.toString()).isNotEmpty();
    }
  }

  @Test
  void theDefaultsRenderTheDispatcherAndNothingOptional() {
    List<HasMetadata> objs = render(t -> t);
    assertThat(kinds(objs))
        .containsExactly(
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "PriorityClass",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount");
    // Cluster-wide, the dispatcher may review tokens (a build pod's runner proof) and read the
    // balloons' PriorityClass, nothing else.
    assertThat(
            Chart.roleAccess(objs.stream().filter(o -> o.getKind().equals("ClusterRole")).toList()))
        .containsExactly(
            "authentication.k8s.io/tokenreviews create", "scheduling.k8s.io/priorityclasses get");

    Deployment d = one(objs, Deployment.class, "oneshot");
    assertThat(d.getSpec().getReplicas()).isEqualTo(2);
    var pod = d.getSpec().getTemplate().getSpec();
    assertThat(pod.getServiceAccountName()).isEqualTo("oneshot");
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(pod.getSecurityContext().getSeccompProfile().getType()).isEqualTo("RuntimeDefault");
    assertThat(pod.getTerminationGracePeriodSeconds()).isEqualTo(30L);
    Container c = pod.getContainers().get(0);
    assertThat(c.getImage()).isEqualTo("ghcr.io/oneshot-dev/oneshot:0.1.0");
    assertThat(c.getArgs())
        .containsExactly("dispatcher", "--config", "/etc/oneshot/config/oneshot.yaml");
    assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/readyz");
    assertThat(c.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/healthz");
    assertThat(c.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(c.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
    assertThat(c.getResources().getLimits()).containsKey("memory");
    // The database URL comes from the Secret the operator made (the default name).
    var url =
        c.getEnv().stream().filter(e -> e.getName().equals("ONESHOT_DATABASE_URL")).findFirst();
    assertThat(url.orElseThrow().getValueFrom().getSecretKeyRef().getName())
        .isEqualTo("oneshot-database");

    PodDisruptionBudget pdb = one(objs, PodDisruptionBudget.class, "oneshot");
    assertThat(pdb.getSpec().getSelector().getMatchLabels())
        .isEqualTo(d.getSpec().getSelector().getMatchLabels());
    Service svc = one(objs, Service.class, "oneshot");
    assertThat(svc.getSpec().getSelector()).isEqualTo(d.getSpec().getSelector().getMatchLabels());
    assertThat(svc.getSpec().getPorts().get(0).getPort()).isEqualTo(8080);

    // The admin token: a Secret generated once by a pre-install hook (Helm renders hooks apart
    // from the release's objects, so it is read from its template here).
    assertThat(all(objs, Secret.class)).isEmpty();
    assertThat(
            pod.getVolumes().stream()
                .filter(v -> v.getName().equals("admin-token"))
                .findFirst()
                .orElseThrow()
                .getSecret()
                .getSecretName())
        .isEqualTo("oneshot-admin-token");
  }

  @Test
  void theEncryptionKeysFileTheConfigNamesIsWhereTheDeploymentMountsTheirSecret()
      throws IOException {
    for (boolean existing : List.of(false, true)) {
      List<HasMetadata> objs =
          render(
              t ->
                  existing
                      ? t.set("encryption.existingSecret", "our-keys")
                          .set("encryption.secretKey", "ring")
                      : t);
      String cfg = one(objs, ConfigMap.class, "oneshot-config").getData().get("oneshot.yaml");
      String keysFile = tree(cfg).path("encryption").path("keysFile").asText();
      var spec = one(objs, Deployment.class, "oneshot").getSpec().getTemplate().getSpec();
      var mount =
          spec.getContainers().get(0).getVolumeMounts().stream()
              .filter(m -> m.getName().equals("encryption-keys"))
              .findFirst()
              .orElseThrow();
      var volume =
          spec.getVolumes().stream()
              .filter(v -> v.getName().equals("encryption-keys"))
              .findFirst()
              .orElseThrow()
              .getSecret();
      assertThat(mount.getMountPath() + "/" + volume.getItems().get(0).getPath())
          .isEqualTo(keysFile);
      assertThat(volume.getSecretName()).isEqualTo(existing ? "our-keys" : "oneshot-encryption");
      assertThat(volume.getItems().get(0).getKey()).isEqualTo(existing ? "ring" : "keys");
    }
    // Generated once, at install, in the id=secret form the dispatcher reads.
    String template = Files.readString(CHART.resolve("templates/secrets.yaml"));
    String keys =
        template.substring(template.indexOf("{{- if not .Values.encryption.existingSecret }}"));
    assertThat(keys)
        .contains("helm.sh/hook: pre-install")
        .contains("helm.sh/resource-policy: keep")
        .contains("printf \"k1=%s\\n\" (randAlphaNum 48)");
  }

  /**
   * Another cluster's kubeconfig comes from its Secret, mounted whole (every key a file, not a
   * subPath: a rotated credential reaches the files) where the configuration names it; the
   * dispatcher reads the rendered configuration; the home cluster gets no Role for a namespace only
   * the other's routes use.
   */
  @Test
  void anotherClustersKubeconfigIsMountedFromItsSecretWhereTheConfigurationReadsIt()
      throws IOException {
    List<HasMetadata> objs =
        render(t -> t.withValuesFile(CLUSTERS).set("routes[1].namespace", "far"));
    String cfg = one(objs, ConfigMap.class, "oneshot-config").getData().get("oneshot.yaml");
    JsonNode cluster = tree(cfg).path("clusters").get(0);
    assertThat(cluster.path("name").asText()).isEqualTo("us");
    assertThat(cluster.path("namespace").asText()).isEqualTo("builds");
    assertThat(cluster.has("kubeconfigSecret")).isFalse();
    var spec = one(objs, Deployment.class, "oneshot").getSpec().getTemplate().getSpec();
    var mount =
        spec.getContainers().get(0).getVolumeMounts().stream()
            .filter(m -> m.getName().equals("cluster-us"))
            .findFirst()
            .orElseThrow();
    assertThat(mount.getSubPath()).isNull();
    var volume =
        spec.getVolumes().stream()
            .filter(v -> v.getName().equals("cluster-us"))
            .findFirst()
            .orElseThrow()
            .getSecret();
    assertThat(volume.getSecretName()).isEqualTo("cluster-us");
    // Every key of the Secret, each a file beside the kubeconfig: the certificates, keys and
    // token files it names by a relative path are there too.
    assertThat(volume.getItems()).isEmpty();
    assertThat(mount.getMountPath() + "/kubeconfig").isEqualTo(cluster.path("kubeconfig").asText());
    OneshotConfig config =
        ConfigLoader.parse(
            cfg,
            "rendered",
            Map.of(
                "ONESHOT_ADMIN_TOKEN",
                "an-admin-token-of-32-characters!",
                "ONESHOT_ENCRYPTION_KEYS",
                "k1=a-key-of-the-chart-0123456789abcdef"));
    assertThat(config.route("us").orElseThrow().cluster()).isEqualTo("us");
    assertThat(config.route("eu").orElseThrow().cluster()).isEqualTo(OneshotConfig.HOME);
    assertThat(all(objs, Role.class).stream().map(r -> r.getMetadata().getNamespace()))
        .containsExactly("oneshot");
  }

  @Test
  void theGeneratedAdminTokenIsMadeOnceAtInstall() throws IOException {
    String template = Files.readString(CHART.resolve("templates/secrets.yaml"));
    String token =
        template.substring(template.indexOf("{{- if not .Values.adminToken.existingSecret }}"));
    assertThat(token)
        .contains("helm.sh/hook: pre-install")
        .contains("helm.sh/resource-policy: keep")
        .contains("randAlphaNum 48")
        .doesNotContain("lookup");
  }

  @Test
  void theRoleGrantsExactlyWhatTheDispatcherUsesInEachBuildNamespace() {
    List<HasMetadata> objs = render(t -> t.withValuesFile(ORGS));
    List<Role> roles = all(objs, Role.class);
    assertThat(roles.stream().map(r -> r.getMetadata().getNamespace()))
        .containsExactlyInAnyOrder(
            "oneshot", "builds-default", "builds-experimental", "builds-demo");
    for (Role role : roles) {
      for (PolicyRule rule : role.getRules()) {
        assertThat(rule.getResourceNames()).isNullOrEmpty();
        assertThat(rule.getNonResourceURLs()).isNullOrEmpty();
      }
      assertThat(Chart.roleAccess(List.of(role)))
          .as(role.getMetadata().getNamespace())
          .isEqualTo(DISPATCHER_VERBS);
    }
    for (RoleBinding b : all(objs, RoleBinding.class)) {
      assertThat(b.getRoleRef().getKind()).isEqualTo("Role");
      assertThat(b.getSubjects())
          .singleElement()
          .satisfies(
              s -> {
                assertThat(s.getName()).isEqualTo("oneshot");
                assertThat(s.getNamespace()).isEqualTo("oneshot");
              });
    }
  }

  @Test
  void buildPodsRunAsAnAccountWithNoPermissionsAndNoToken() {
    List<HasMetadata> objs = render(t -> t.withValuesFile(ORGS));
    List<ServiceAccount> build =
        all(objs, ServiceAccount.class).stream()
            .filter(a -> a.getMetadata().getName().equals("oneshot-build"))
            .toList();
    assertThat(build.stream().map(a -> a.getMetadata().getNamespace()))
        .containsExactlyInAnyOrder(
            "oneshot", "builds-default", "builds-experimental", "builds-demo");
    assertThat(build).allMatch(a -> Boolean.FALSE.equals(a.getAutomountServiceAccountToken()));
    assertThat(all(objs, RoleBinding.class))
        .allSatisfy(
            b -> assertThat(b.getSubjects()).noneMatch(s -> s.getName().equals("oneshot-build")));

    ConfigMap templates = one(objs, ConfigMap.class, "oneshot-job-templates");
    assertThat(templates.getData()).containsOnlyKeys("script.yaml", "terraform.yaml");
    templates
        .getData()
        .forEach(
            (file, yaml) -> {
              Job job = K8S.unmarshal(yaml, Job.class);
              var pod = job.getSpec().getTemplate().getSpec();
              assertThat(pod.getServiceAccountName()).as(file).isEqualTo("oneshot-build");
              assertThat(pod.getAutomountServiceAccountToken()).as(file).isFalse();
              assertThat(pod.getContainers())
                  .filteredOn(c -> c.getName().equals("provisionerd"))
                  .singleElement()
                  .satisfies(
                      c -> assertThat(c.getImage()).isEqualTo("ghcr.io/oneshot-dev/oneshot:0.1.0"));
            });
  }

  /** Writes the chart's two ConfigMaps where the Deployment mounts them, under {@code root}. */
  private static OneshotConfig loadLikeTheDispatcher(List<HasMetadata> objs, Path root)
      throws IOException {
    Deployment d = one(objs, Deployment.class, "oneshot");
    var pod = d.getSpec().getTemplate().getSpec();
    Container c = pod.getContainers().get(0);
    Map<String, String> mountOfVolume =
        c.getVolumeMounts().stream()
            .collect(Collectors.toMap(m -> m.getName(), m -> m.getMountPath()));
    Set<String> ours =
        all(objs, ConfigMap.class).stream()
            .map(m -> m.getMetadata().getName())
            .collect(Collectors.toSet());
    for (var v : pod.getVolumes()) {
      // The chart's own ConfigMaps; one an operator mounts (extraVolumes) is not the dispatcher's.
      if (v.getConfigMap() == null || !ours.contains(v.getConfigMap().getName())) {
        continue;
      }
      Path dir = root.resolve(mountOfVolume.get(v.getName()).substring(1));
      Files.createDirectories(dir);
      for (var e : one(objs, ConfigMap.class, v.getConfigMap().getName()).getData().entrySet()) {
        Files.writeString(dir.resolve(e.getKey()), e.getValue());
      }
    }
    Path file = root.resolve(c.getArgs().get(2).substring(1));
    // The mounted Secrets stand in the environment, as the Deployment's env and files would: each
    // variable taken from a Secret holds a URL naming that Secret and key.
    Map<String, String> env = new java.util.HashMap<>();
    for (var e : c.getEnv()) {
      if (e.getValueFrom() != null && e.getValueFrom().getSecretKeyRef() != null) {
        var ref = e.getValueFrom().getSecretKeyRef();
        env.put(e.getName(), "postgresql://secret@" + ref.getName() + "/" + ref.getKey());
      }
    }
    env.put("ONESHOT_ADMIN_TOKEN", "a-token-of-the-chart-0123456789");
    env.put("ONESHOT_ENCRYPTION_KEYS", "k1=a-key-of-the-chart-0123456789abcdef");
    OneshotConfig config = ConfigLoader.load(file, env);
    String templateDir = config.launcher().kubernetes().templateDir().toString();
    assertThat(mountOfVolume).containsValue(templateDir);
    JobTemplates.load(root.resolve(templateDir.substring(1)), config.routes(), K8S);
    return config;
  }

  @Test
  void routesAndTemplatesReachTheConfigIntactAndLoadThroughTheDispatchersLoader()
      throws IOException {
    List<HasMetadata> objs = render(t -> t.withValuesFile(ORGS));
    OneshotConfig config = loadLikeTheDispatcher(objs, tmp);
    assertThat(config.launcher().kind()).isEqualTo("kubernetes");
    assertThat(config.api().publicUrl()).isEqualTo("http://oneshot.oneshot.svc:8080");
    assertThat(config.dispatch().maxConcurrent()).isEqualTo(10);
    assertThat(config.allTeams())
        .containsExactly(
            new OneshotConfig.Team("main", 3, 2, null, null),
            new OneshotConfig.Team("labs", 1, 0, 2, null));
    assertThat(config.routes())
        .extracting(
            OneshotConfig.Route::name, OneshotConfig.Route::maxConcurrent, r -> r.namespace())
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple("default", 6, "builds-default"),
            org.assertj.core.groups.Tuple.tuple("experimental", 2, "builds-experimental"),
            org.assertj.core.groups.Tuple.tuple("demo", 2, "builds-demo"));
    assertThat(config.routes().get(0).tags()).isEqualTo(Map.of("org", "default"));
    assertThat(config.routes().get(0).warm().schedule()).hasSize(1);
    assertThat(config.routes().get(0).warm().max()).isEqualTo(6);
    assertThat(config.routes().get(1).warm()).isEqualTo(OneshotConfig.Warm.NONE);
    assertThat(config.launcher().kubernetes().balloonPriorityClass())
        .isEqualTo("oneshot-oneshot-balloon");
    assertThat(config.routes().get(2).retryAfterAcquire()).isTrue();
    assertThat(config.routes().get(1).timeout()).isEqualTo(java.time.Duration.ofMinutes(30));

    // The admin token file the config names is where the Deployment mounts the Secret's key.
    String cfg = one(objs, ConfigMap.class, "oneshot-config").getData().get("oneshot.yaml");
    String tokenFile = tree(cfg).path("api").path("adminTokenFile").asText();
    Deployment d = one(objs, Deployment.class, "oneshot");
    var tokenMount =
        d.getSpec().getTemplate().getSpec().getContainers().get(0).getVolumeMounts().stream()
            .filter(m -> m.getName().equals("admin-token"))
            .findFirst()
            .orElseThrow();
    var tokenVolume =
        d.getSpec().getTemplate().getSpec().getVolumes().stream()
            .filter(v -> v.getName().equals("admin-token"))
            .findFirst()
            .orElseThrow();
    assertThat(
            tokenMount.getMountPath() + "/" + tokenVolume.getSecret().getItems().get(0).getPath())
        .isEqualTo(tokenFile);
  }

  @Test
  void theCoderExampleLoadsThroughTheDispatchersLoaderWithItsUrlAndKeyFromSecrets()
      throws IOException {
    List<HasMetadata> objs = render(t -> t.withValuesFile(CODER));
    OneshotConfig config = loadLikeTheDispatcher(objs, tmp.resolve("root"));
    OneshotConfig.Source s = config.sources().get(0);
    assertThat(s.name()).isEqualTo("coder");
    assertThat(s.coder()).isTrue();
    assertThat(s.url()).isEqualTo("postgresql://secret@coder-db-reader/url");
    assertThat(s.feeds()).containsExactly(new OneshotConfig.Feed("coder-prod", "acme"));
    // The URL is never written into the ConfigMap.
    String cfg = one(objs, ConfigMap.class, "oneshot-config").getData().get("oneshot.yaml");
    assertThat(cfg).doesNotContain("databaseSecret").doesNotContain("coder-db-reader");
    // The build pod: coder copied by the init container, the key from the route's Secret, and the
    // oneshot image filled in by the chart.
    Job job =
        K8S.unmarshal(
            one(objs, ConfigMap.class, "oneshot-job-templates").getData().get("coder-prod.yaml"),
            Job.class);
    var pod = job.getSpec().getTemplate().getSpec();
    assertThat(pod.getInitContainers().get(0).getCommand())
        .containsExactly("cp", "/opt/coder", "/coder-bin/coder");
    Container c = pod.getContainers().get(0);
    assertThat(c.getImage()).isEqualTo("ghcr.io/oneshot-dev/oneshot:0.1.0");
    assertThat(c.getEnv())
        .anySatisfy(
            e -> {
              assertThat(e.getName()).isEqualTo("CODER_PROVISIONER_DAEMON_KEY");
              assertThat(e.getValueFrom().getSecretKeyRef().getName()).isEqualTo("coder-key-prod");
            });
  }

  @Test
  void aGpuRouteKeepsItsNodeSelectorAndTolerations() throws IOException {
    List<HasMetadata> objs = render(t -> t.withValuesFile(GPU));
    OneshotConfig config = loadLikeTheDispatcher(objs, tmp);
    assertThat(config.routes())
        .extracting(OneshotConfig.Route::name)
        .containsExactly("default", "gpu");
    assertThat(config.routes().get(1).tags()).isEqualTo(Map.of("gpu", "true"));

    ConfigMap templates = one(objs, ConfigMap.class, "oneshot-job-templates");
    assertThat(templates.getData()).containsKeys("gpu.yaml", "script.yaml", "terraform.yaml");
    var pod =
        K8S.unmarshal(templates.getData().get("gpu.yaml"), Job.class)
            .getSpec()
            .getTemplate()
            .getSpec();
    assertThat(pod.getNodeSelector()).isEqualTo(Map.of("node.kubernetes.io/pool", "gpu"));
    assertThat(pod.getTolerations())
        .singleElement()
        .satisfies(
            t -> {
              assertThat(t.getKey()).isEqualTo("nvidia.com/gpu");
              assertThat(t.getEffect()).isEqualTo("NoSchedule");
            });
    assertThat(pod.getContainers().get(0).getResources().getLimits()).containsKey("nvidia.com/gpu");
    assertThat(pod.getServiceAccountName()).isEqualTo("oneshot-build");
  }

  @Test
  void optionalObjectsAppearOnlyWhenEnabled() {
    assertThat(kinds(render(t -> t)))
        .doesNotContain("NetworkPolicy", "ServiceMonitor", "PrometheusRule");
    assertThat(render(t -> t).stream().map(o -> o.getMetadata().getName()))
        .doesNotContain("oneshot-dashboard");

    List<HasMetadata> net = render(t -> t.set("networkPolicy.enabled", "true"));
    NetworkPolicy np = one(net, NetworkPolicy.class, "oneshot-builds");
    assertThat(np.getSpec().getPolicyTypes()).containsExactly("Ingress", "Egress");
    assertThat(np.getSpec().getIngress()).isEmpty();
    assertThat(np.getSpec().getPodSelector().getMatchExpressions())
        .singleElement()
        .satisfies(e -> assertThat(e.getKey()).isEqualTo("oneshot.io/build"));
    // Egress to the dispatcher's pods on the API port.
    assertThat(np.getSpec().getEgress())
        .filteredOn(e -> !e.getTo().isEmpty())
        .singleElement()
        .satisfies(
            e -> {
              assertThat(e.getTo().get(0).getPodSelector().getMatchLabels())
                  .containsEntry("app.kubernetes.io/component", "dispatcher");
              assertThat(e.getPorts().get(0).getPort().getIntVal()).isEqualTo(8080);
            });
    assertThat(kinds(net)).contains("NetworkPolicy").doesNotContain("ServiceMonitor");

    List<HasMetadata> mon = render(t -> t.set("serviceMonitor.enabled", "true"));
    GenericKubernetesResource sm =
        all(mon, GenericKubernetesResource.class).stream()
            .filter(o -> o.getKind().equals("ServiceMonitor"))
            .findFirst()
            .orElseThrow();
    assertThat(sm.getApiVersion()).isEqualTo("monitoring.coreos.com/v1");
    // It scrapes the metrics port, which the Ingress (port http) never routes; the dispatcher
    // serves /metrics there because its configuration says so.
    assertThat(String.valueOf(sm.<Object>get("spec", "endpoints"))).contains("port=metrics");
    io.fabric8.kubernetes.api.model.Service svc =
        one(mon, io.fabric8.kubernetes.api.model.Service.class, "oneshot");
    assertThat(svc.getSpec().getPorts())
        .extracting(io.fabric8.kubernetes.api.model.ServicePort::getName)
        .containsExactly("http", "metrics");
    assertThat(
            one(mon, io.fabric8.kubernetes.api.model.ConfigMap.class, "oneshot-config")
                .getData()
                .get("oneshot.yaml"))
        .contains("metricsListen: 0.0.0.0:9090");
    assertThat(kinds(mon)).doesNotContain("NetworkPolicy", "PrometheusRule");

    assertThat(kinds(render(t -> t.set("prometheusRule.enabled", "true"))))
        .contains("PrometheusRule")
        .doesNotContain("ServiceMonitor");
    assertThat(
            render(t -> t.set("grafanaDashboard.enabled", "true")).stream()
                .map(o -> o.getMetadata().getName()))
        .contains("oneshot-dashboard");
  }

  @Test
  void aDatabaseUrlGivenAsAValueIsKeptInASecretOfTheChart() {
    List<HasMetadata> objs =
        render(t -> t.set("database.url", "postgresql://oneshot:pw@db:5432/oneshot"));
    Secret s = one(objs, Secret.class, "oneshot-database");
    assertThat(s.getStringData()).containsEntry("url", "postgresql://oneshot:pw@db:5432/oneshot");
    Container c =
        one(objs, Deployment.class, "oneshot")
            .getSpec()
            .getTemplate()
            .getSpec()
            .getContainers()
            .get(0);
    assertThat(c.getEnv().get(0).getValueFrom().getSecretKeyRef().getName())
        .isEqualTo("oneshot-database");

    assertThatThrownBy(() -> render(t -> t.set("database.existingSecret", "")))
        .hasMessageContaining("database.existingSecret");
  }

  @Test
  void extraCaCertsAreMountedWhereTheVariableTheDispatcherReadsPoints() {
    for (String from : List.of("secret", "configMap")) {
      List<HasMetadata> objs =
          render(
              t -> t.set("extraCaCerts." + from, "corp-ca").set("extraCaCerts.key", "bundle.pem"));
      var spec = one(objs, Deployment.class, "oneshot").getSpec().getTemplate().getSpec();
      Container c = spec.getContainers().get(0);
      String path =
          c.getEnv().stream()
              .filter(e -> e.getName().equals(io.oneshot.config.ExtraCaCerts.ENV))
              .findFirst()
              .orElseThrow()
              .getValue();
      var mount =
          c.getVolumeMounts().stream()
              .filter(m -> m.getName().equals("extra-ca-certs"))
              .findFirst()
              .orElseThrow();
      var volume =
          spec.getVolumes().stream()
              .filter(v -> v.getName().equals("extra-ca-certs"))
              .findFirst()
              .orElseThrow();
      String item =
          from.equals("secret")
              ? volume.getSecret().getItems().get(0).getPath()
              : volume.getConfigMap().getItems().get(0).getPath();
      assertThat(mount.getMountPath() + "/" + item).isEqualTo(path);
      assertThat(
              from.equals("secret")
                  ? volume.getSecret().getSecretName()
                  : volume.getConfigMap().getName())
          .isEqualTo("corp-ca");
    }
    // Not asked for: no variable, no volume.
    var plain = one(render(t -> t), Deployment.class, "oneshot").getSpec().getTemplate().getSpec();
    assertThat(plain.getContainers().get(0).getEnv())
        .noneMatch(e -> e.getName().equals(io.oneshot.config.ExtraCaCerts.ENV));
    assertThat(plain.getVolumes()).noneMatch(v -> v.getName().equals("extra-ca-certs"));
  }

  @Test
  void anExistingAdminTokenSecretIsUsedInsteadOfAGeneratedOne() {
    List<HasMetadata> objs =
        render(
            t -> t.set("adminToken.existingSecret", "ops-token").set("adminToken.secretKey", "t"));
    assertThat(all(objs, Secret.class)).isEmpty();
    var token =
        one(objs, Deployment.class, "oneshot")
            .getSpec()
            .getTemplate()
            .getSpec()
            .getVolumes()
            .stream()
            .filter(v -> v.getName().equals("admin-token"))
            .findFirst()
            .orElseThrow()
            .getSecret();
    assertThat(token.getSecretName()).isEqualTo("ops-token");
    assertThat(token.getItems().get(0).getKey()).isEqualTo("t");
  }

  /**
   * No Docker engine runs here, so the image is checked against the chart that runs it: the same
   * user, the same configuration path, the same entrypoint commands and work directory.
   */
  @Test
  void theImageAndTheChartAgreeOnUserPathsAndCommands() throws IOException {
    String dockerfile = Files.readString(Path.of("Dockerfile"));
    List<HasMetadata> objs = render(t -> t);
    var pod = one(objs, Deployment.class, "oneshot").getSpec().getTemplate().getSpec();
    long uid = pod.getSecurityContext().getRunAsUser();
    assertThat(dockerfile).contains("USER " + uid + ":" + uid).contains("ARG UID=" + uid);
    assertThat(dockerfile)
        .contains("CMD [\"" + String.join("\", \"", pod.getContainers().get(0).getArgs()) + "\"]");
    assertThat(dockerfile).contains("ENTRYPOINT [\"/usr/local/bin/oneshot\"]");
    // Terraform is pinned and verified.
    assertThat(dockerfile)
        .containsPattern("ARG TERRAFORM_VERSION=[0-9]+\\.[0-9]+\\.[0-9]+")
        .containsPattern("ARG TERRAFORM_SHA256_AMD64=[0-9a-f]{64}")
        .contains("sha256sum -c");
    // Build pods: the templates' command, user and work directory are the image's.
    for (String yaml : one(objs, ConfigMap.class, "oneshot-job-templates").getData().values()) {
      var spec = K8S.unmarshal(yaml, Job.class).getSpec().getTemplate().getSpec();
      Container c = spec.getContainers().get(0);
      assertThat(c.getArgs()).containsExactly("provisionerd");
      assertThat(dockerfile).contains("  provisionerd)");
      assertThat(spec.getSecurityContext().getRunAsUser()).isEqualTo(uid);
      assertThat(c.getVolumeMounts()).anyMatch(m -> m.getMountPath().equals("/work"));
      assertThat(dockerfile).contains("ONESHOT_WORK_DIR=/work");
    }
  }

  @Test
  void aBuildInAnImageOfItsOwnRunsTheProvisionerdTheInitContainerCopied() throws IOException {
    List<HasMetadata> objs = render(t -> t.withValuesFile(OWN_IMAGE));
    OneshotConfig config = loadLikeTheDispatcher(objs, tmp);
    assertThat(config.routes())
        .extracting(OneshotConfig.Route::name)
        .containsExactly("default", "aws");
    ConfigMap templates = one(objs, ConfigMap.class, "oneshot-job-templates");
    Job job = K8S.unmarshal(templates.getData().get("aws.yaml"), Job.class);
    var pod = job.getSpec().getTemplate().getSpec();
    Container init = pod.getInitContainers().get(0);
    Container build = pod.getContainers().get(0);
    // The image of its own is kept; what it runs is the copy the init container made.
    assertThat(build.getImage()).isEqualTo("public.ecr.aws/aws-cli/aws-cli:2.17.0");
    String copied = init.getCommand().get(2);
    assertThat(copied).contains("/oneshot/jre").contains("/oneshot/oneshot.jar");
    assertThat(build.getCommand()).startsWith("/oneshot/jre/bin/java").endsWith("provisionerd");
    assertThat(build.getCommand()).contains("/oneshot/oneshot.jar");
    // The paths the init container copies from are the oneshot image's own.
    String dockerfile = Files.readString(Path.of("Dockerfile"));
    assertThat(dockerfile).contains("COPY --from=build /oneshot.jar /opt/oneshot/oneshot.jar");
    // git and ssh for terraform modules from git sources; a slim jar; labels; cross-built stages.
    assertThat(dockerfile)
        .contains("apt-get install -y --no-install-recommends git openssh-client")
        .contains("-Pslim")
        .contains("org.opencontainers.image.source=")
        .contains("org.opencontainers.image.revision=")
        .contains("FROM --platform=$BUILDPLATFORM ${JDK_IMAGE} AS build");
    assertThat(dockerfile).contains("ARG JRE_IMAGE=eclipse-temurin:");
    assertThat(init.getVolumeMounts()).anyMatch(m -> m.getMountPath().equals("/oneshot"));
    assertThat(build.getVolumeMounts())
        .anyMatch(m -> m.getMountPath().equals("/oneshot") && Boolean.TRUE.equals(m.getReadOnly()));
    // The chart gives the pod its no-permission ServiceAccount, as for every template.
    assertThat(pod.getAutomountServiceAccountToken()).isFalse();
  }

  @Test
  void balloonsRunBelowEveryBuildAndBuildsAtTheChartsClassUnlessTheirTemplateNamesOne()
      throws IOException {
    List<HasMetadata> objs = render(t -> t.withValuesFile(ORGS));
    var balloon =
        one(
            objs,
            io.fabric8.kubernetes.api.model.scheduling.v1.PriorityClass.class,
            "oneshot-oneshot-balloon");
    var build =
        one(
            objs,
            io.fabric8.kubernetes.api.model.scheduling.v1.PriorityClass.class,
            "oneshot-oneshot-build");
    assertThat(balloon.getValue()).isEqualTo(-1);
    assertThat(balloon.getPreemptionPolicy()).isEqualTo("Never");
    assertThat(balloon.getGlobalDefault()).isFalse();
    assertThat(build.getValue()).isZero();
    assertThat(build.getPreemptionPolicy()).isEqualTo("PreemptLowerPriority");
    ConfigMap templates = one(objs, ConfigMap.class, "oneshot-job-templates");
    Job job = K8S.unmarshal(templates.getData().get("script.yaml"), Job.class);
    assertThat(job.getSpec().getTemplate().getSpec().getPriorityClassName())
        .isEqualTo("oneshot-oneshot-build");
    // A template's own class is kept; without the chart's classes, none is set.
    Path own = tmp.resolve("own-class.yaml");
    Files.writeString(
        own,
        "jobTemplates: {script.yaml: {spec: {template: {spec: {priorityClassName: ci-builds}}}}}\n");
    job =
        K8S.unmarshal(
            one(render(t -> t.withValuesFile(own)), ConfigMap.class, "oneshot-job-templates")
                .getData()
                .get("script.yaml"),
            Job.class);
    assertThat(job.getSpec().getTemplate().getSpec().getPriorityClassName()).isEqualTo("ci-builds");
    List<HasMetadata> none =
        render(
            t ->
                t.set("priorityClasses.create", "false")
                    .set("priorityClasses.balloonName", "platform-overprovisioning"));
    assertThat(kinds(none)).doesNotContain("PriorityClass");
    job =
        K8S.unmarshal(
            one(none, ConfigMap.class, "oneshot-job-templates").getData().get("script.yaml"),
            Job.class);
    assertThat(job.getSpec().getTemplate().getSpec().getPriorityClassName()).isNull();
    assertThat(
            tree(one(none, ConfigMap.class, "oneshot-config").getData().get("oneshot.yaml"))
                .path("launcher")
                .path("kubernetes")
                .path("balloonPriorityClass")
                .asText())
        .isEqualTo("platform-overprovisioning");
    assertThatThrownBy(() -> render(t -> t.set("priorityClasses.build", "-5")))
        .hasMessageContaining(
            "priorityClasses.balloon (-1) must be below priorityClasses.build (-5)");
  }

  /** Values the chart's schema (or its templates) refuse at helm time, naming the key. */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          replicaCount: two               | replicaCount: two                                          | at '/replicaCount': got string, want integer
          route name with capitals        | routes: [{name: Default, template: script.yaml}]           | at '/routes/0/name': 'Default' does not match pattern
          route naming a missing template | routes: [{name: a, template: nosuch.yaml}]                 | routes[0].template: "nosuch.yaml" is not a key of jobTemplates (script.yaml, terraform.yaml)
          route without a template        | routes: [{name: a}]                                        | at '/routes/0': missing property 'template'
          route with an unknown field     | routes: [{name: a, template: script.yaml, maxConcurent: 3}] | at '/routes/0': additional properties 'maxConcurent' not allowed
          no routes at all                | routes: []                                                 | at '/routes': minItems: got 0, want 1
          a duration that is not one      | routes: [{name: a, template: script.yaml, timeout: soon}]  | at '/routes/0/timeout': 'soon' does not match pattern
          a duration given as a number    | routes: [{name: a, template: script.yaml, timeout: 90}]    | a duration is text with its unit, like 90s, 5m or 1h30m
          a misspelt top-level key        | replicas: 3                                                | additional properties 'replicas' not allowed
          a log format                    | logging: {format: xml}                                     | at '/logging/format': value must be one of 'text', 'json'
          a pull policy                   | image: {pullPolicy: Sometimes}                             | at '/image/pullPolicy': value must be one of
          a template that is not a Job    | jobTemplates: {script.yaml: {kind: Pod}}                   | at '/jobTemplates/script.yaml/kind': value must be 'Job'
          a source without its Secret     | sources: [{name: c, kind: coder, routes: [{route: default, organization: o}]}] | at '/sources/0': missing property 'databaseSecret'
          a source of an unknown kind     | sources: [{name: c, kind: kafka, databaseSecret: {name: s, key: url}, routes: [default]}] | at '/sources/0/kind': value must be one of 'coder', 'postgres'
          CA certificates from two places | extraCaCerts: {secret: s, configMap: c}                    | at '/extraCaCerts': 'not' failed
          a balloon class not below 0     | priorityClasses: {balloon: 0}                              | at '/priorityClasses/balloon': maximum: got 0, want -1
          warm room with an unknown field | routes: [{name: a, template: script.yaml, warm: {idel: 2}}] | at '/routes/0/warm': additional properties 'idel' not allowed
          a period without its length     | routes: [{name: a, template: script.yaml, warm: {schedule: [{cron: "0 9 * * *", balloons: 3}]}}] | at '/routes/0/warm/schedule/0': missing property 'length'
          a negative scale factor         | routes: [{name: a, template: script.yaml, warm: {scaleFactor: -1}}] | at '/routes/0/warm/scaleFactor': minimum: got -1, want 0
          """)
  void malformedValuesAreRefusedAtHelmTimeNamingTheKey(String what, String values, String message)
      throws IOException {
    Path file = tmp.resolve("bad-values.yaml");
    Files.writeString(file, values + "\n");
    assertThatThrownBy(() -> render(t -> t.withValuesFile(file)))
        .as(what)
        .hasMessageContaining(message);
  }

  /**
   * The rules between routes and teams no schema can say: helm refuses what the dispatcher would,
   * in its words (templates/_checks.tpl), and what either takes the other takes too.
   */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          two untagged routes     | routes: [{name: a, template: script.yaml}, {name: b, template: script.yaml}]
          a shadowed tagged route | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: b, tags: {team: x1}, template: script.yaml}]
          a superset first shadows| routes: [{name: a, tags: {team: x1, env: prod}, template: script.yaml}, {name: b, tags: {team: x1}, template: script.yaml}]
          another value of a tag  | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: b, tags: {team: x2}, template: script.yaml}]
          more tags after fewer   | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: b, tags: {team: x1, env: prod}, template: script.yaml}]
          untagged false, no tags | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: b, untagged: false, template: script.yaml}]
          untagged after tags     | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: b, template: script.yaml}]
          untagged behind another | routes: [{name: a, tags: {team: x1}, untagged: true, template: script.yaml}, {name: b, template: script.yaml}]
          a duplicate route       | routes: [{name: a, tags: {team: x1}, template: script.yaml}, {name: a, tags: {team: x2}, template: script.yaml}]
          a duplicate team        | routes: [{name: a, team: t, template: script.yaml}]\\nteams: [{name: t}, {name: t}]
          an unknown team         | routes: [{name: a, team: nope, template: script.yaml}]\\nteams: [{name: t}, {name: u}]
          guarantees over the cap | routes: [{name: a, team: t, template: script.yaml}, {name: b, tags: {k: v1}, team: u, template: script.yaml}]\\nteams: [{name: t, guaranteed: 60}, {name: u, guaranteed: 50}]
          """)
  void crossFieldRulesAreRefusedByHelmAsByTheDispatcher(String what, String values)
      throws IOException {
    String yaml = values.replace("\\n", "\n");
    Answers a = answers(yaml);
    String dispatcher = a.dispatcher();
    String helm = a.helm();
    if (dispatcher == null) {
      assertThat(helm).as(what + ": the dispatcher takes it, so must helm").isNull();
      return;
    }
    assertThat(helm).as(what + ": the dispatcher refuses it: " + dispatcher).isNotNull();
    // Helm stops at the first rule broken, the dispatcher names them all: helm's is one of them.
    List<String> problems =
        dispatcher
            .lines()
            .map(String::strip)
            .map(l -> l.replaceFirst("^(- |values: )", ""))
            .filter(l -> l.matches("(routes|teams)[\\[:.].*"))
            .toList();
    assertThat(problems).as(what + ": " + dispatcher).isNotEmpty();
    String said = helm;
    assertThat(problems).as(what + ": helm said " + helm).anyMatch(said::contains);
  }

  /**
   * A route's fields, each given values either side of the dispatcher's rules: helm (the values
   * schema, the chart's checks) takes exactly what the dispatcher takes.
   */
  @ParameterizedTest(name = "{0}: {1}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '"',
      textBlock =
          """
          name            | ok-1
          name            | Default
          name            | -a
          name            | abcdefghijabcdefghijabcdefghijabc
          tags            | {team: a.b_c-d}
          tags            | {team: 'a b'}
          tags            | {'bad key!': x1}
          tags            | {team: ''}
          maxConcurrent   | 0
          maxConcurrent   | -1
          maxConcurrent   | 100000
          maxConcurrent   | 100001
          maxConcurrent   | 2.5
          timeout         | 1h30m
          timeout         | 90
          timeout         | 0s
          timeout         | 500ms
          timeout         | 1s
          launchTimeout   | 0s
          hangTimeout     | 0s
          cancelGrace     | 0s
          lease           | 0s
          lease           | 200ms
          lease           | 2m
          lease           | 90s
          drainGrace      | 10s
          drainGrace      | 90s
          drainGrace      | 2h
          cancelGrace     | 5s
          maxAttempts     | 0
          maxAttempts     | 1
          maxAttempts     | 100
          maxAttempts     | 101
          retryAfterAcquire | 'yes'
          retryAfterAcquire | true
          namespace       | team-a
          namespace       | Team_A
          network         | host
          network         | bridge
          passEnv         | [HOME]
          passEnv         | ['1X']
          untagged        | 'no'
          """)
  void aRoutesFieldsAreTakenByHelmAsByTheDispatcher(String field, String value) throws IOException {
    String route =
        field.equals("name")
            ? "{name: " + value + ", tags: {k: v1}, template: script.yaml}"
            : "{name: a, tags: {k: v1}, template: script.yaml, " + field + ": " + value + "}";
    Answers a = answers("routes: [" + route + "]");
    assertThat(a.helm() == null)
        .as("%s: %s — the dispatcher says %s; helm says %s", field, value, a.dispatcher(), a.helm())
        .isEqualTo(a.dispatcher() == null);
  }

  /** What the dispatcher and helm each say of a configuration's values: null where taken. */
  private record Answers(String dispatcher, String helm) {}

  /**
   * {@code yaml} as the dispatcher's configuration (with the chart's default global limit) and as
   * the chart's values.
   */
  private Answers answers(String yaml) throws IOException {
    String dispatcher = null;
    try {
      ConfigLoader.parse(
          yaml + "\ndispatch: {maxConcurrent: 100}\n",
          "values",
          Map.of("ONESHOT_ADMIN_TOKEN", "an-admin-token-of-32-characters!"));
    } catch (io.oneshot.config.ConfigException e) {
      dispatcher = e.getMessage();
    }
    Path file = Files.createTempFile(tmp, "values", ".yaml");
    Files.writeString(file, yaml + "\n");
    String helm = null;
    try {
      render(t -> t.withValuesFile(file));
    } catch (RuntimeException e) {
      helm = e.getMessage();
    }
    return new Answers(dispatcher, helm);
  }

  @Test
  void theSchemasRouteFieldsAreTheDispatchers() throws IOException {
    JsonNode schema = YAML.readTree(CHART.resolve("values.schema.json").toFile());
    Set<String> fields = new TreeSet<>();
    schema
        .path("properties")
        .path("routes")
        .path("items")
        .path("properties")
        .fieldNames()
        .forEachRemaining(fields::add);
    assertThat(fields).isEqualTo(new TreeSet<>(ConfigLoader.ROUTE_FIELDS));
    // A source's fields: the dispatcher's, with its URL from a Secret instead of the environment.
    Set<String> sourceFields = new TreeSet<>();
    YAML.readTree(CHART.resolve("values.schema.json").toFile())
        .path("properties")
        .path("sources")
        .path("items")
        .path("properties")
        .fieldNames()
        .forEachRemaining(sourceFields::add);
    Set<String> expected = new TreeSet<>(ConfigLoader.SOURCE_FIELDS);
    expected.removeAll(Set.of("databaseUrl", "databaseUrlEnv"));
    expected.add("databaseSecret");
    assertThat(sourceFields).isEqualTo(expected);
    Set<String> teamFields = new TreeSet<>();
    schema
        .path("properties")
        .path("teams")
        .path("items")
        .path("properties")
        .fieldNames()
        .forEachRemaining(teamFields::add);
    assertThat(teamFields).isEqualTo(new TreeSet<>(ConfigLoader.TEAM_FIELDS));
    // A cluster's fields: the dispatcher's, with its kubeconfig from a Secret; in-cluster is the
    // dispatcher's own cluster, home.
    Set<String> clusterFields = new TreeSet<>();
    schema
        .path("properties")
        .path("clusters")
        .path("items")
        .path("properties")
        .fieldNames()
        .forEachRemaining(clusterFields::add);
    Set<String> clusterExpected = new TreeSet<>(ConfigLoader.CLUSTER_FIELDS);
    clusterExpected.removeAll(Set.of("kubeconfig", "inCluster"));
    clusterExpected.add("kubeconfigSecret");
    assertThat(clusterFields).isEqualTo(clusterExpected);
  }

  /** The extension points of the dispatcher's pod, and an extra object, as values. */
  private static final String POD_EXTENSIONS =
      """
      priorityClassName: platform-critical
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
      extraEnv:
        - {name: RELEASE, value: "{{ .Release.Name }}"}
      extraVolumes:
        - {name: ca, configMap: {name: corporate-ca}}
      extraVolumeMounts:
        - {name: ca, mountPath: /etc/ssl/corporate, readOnly: true}
      initContainers:
        - {name: wait, image: busybox:1.36, command: [sh, -c, "true"]}
      sidecars:
        - name: cloud-sql-proxy
          image: gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.11.0
          args: ["project:region:db"]
      extraObjects:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: "{{ .Release.Name }}-extra"}
          data: {hello: world}
      """;

  @Test
  void theExtensionPointsReachTheDispatchersPod() throws IOException {
    Path values = tmp.resolve("extended.yaml");
    Files.writeString(
        values,
        """
        serviceAccount: {create: false, name: platform-oneshot}
        rbac: {create: false}
        podSecurityContext: {runAsUser: null, runAsGroup: null}
        containerSecurityContext: {readOnlyRootFilesystem: null}
        """
            + POD_EXTENSIONS);
    List<HasMetadata> objs = render(t -> t.withValuesFile(values));
    Deployment d = one(objs, Deployment.class, "oneshot");
    var pod = d.getSpec().getTemplate().getSpec();
    Container c = pod.getContainers().get(0);
    assertThat(c.getEnv())
        .anyMatch(e -> e.getName().equals("RELEASE") && e.getValue().equals("oneshot"));
    assertThat(c.getVolumeMounts()).anyMatch(m -> m.getMountPath().equals("/etc/ssl/corporate"));
    assertThat(pod.getVolumes()).anyMatch(v -> v.getName().equals("ca"));
    assertThat(pod.getInitContainers()).extracting(Container::getName).containsExactly("wait");
    assertThat(pod.getContainers())
        .extracting(Container::getName)
        .containsExactly("dispatcher", "cloud-sql-proxy");
    // OpenShift's restricted policy picks the user: no fixed runAsUser when the values say so.
    assertThat(pod.getSecurityContext().getRunAsUser()).isNull();
    assertThat(c.getSecurityContext().getReadOnlyRootFilesystem()).isNull();
    assertThat(pod.getPriorityClassName()).isEqualTo("platform-critical");
    assertThat(pod.getTopologySpreadConstraints()).hasSize(1);
    assertThat(pod.getServiceAccountName()).isEqualTo("platform-oneshot");
    assertThat(kinds(objs)).doesNotContain("Role", "RoleBinding");
    assertThat(all(objs, ServiceAccount.class))
        .extracting(sa -> sa.getMetadata().getName())
        .doesNotContain("platform-oneshot", "oneshot");
    assertThat(one(objs, ConfigMap.class, "oneshot-extra").getData())
        .containsEntry("hello", "world");
    // The pod carries the chart's labels, not only the selector's.
    assertThat(d.getSpec().getTemplate().getMetadata().getLabels())
        .containsKeys("app.kubernetes.io/version", "helm.sh/chart")
        .allSatisfy(
            (k, v) -> assertThat(v).matches("[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?"));

    // With the chart's ServiceAccount, the Role binds it.
    List<HasMetadata> defaults = render(t -> t);
    RoleBinding rb = all(defaults, RoleBinding.class).get(0);
    assertThat(rb.getSubjects().get(0).getName())
        .isEqualTo(
            one(defaults, Deployment.class, "oneshot")
                .getSpec()
                .getTemplate()
                .getSpec()
                .getServiceAccountName());
  }

  @Test
  void theDispatchersOwnNetworkPolicyLetsBuildPodsOfEveryBuildNamespaceReachItsApi()
      throws IOException {
    Path values = tmp.resolve("netpol.yaml");
    Files.writeString(
        values,
        """
        networkPolicy:
          enabled: true
          dispatcherIngress:
            - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]
        """);
    List<HasMetadata> objs = render(t -> t.withValuesFile(ORGS).withValuesFile(values));
    NetworkPolicy np = one(objs, NetworkPolicy.class, "oneshot-dispatcher");
    Deployment d = one(objs, Deployment.class, "oneshot");
    assertThat(np.getSpec().getPolicyTypes()).containsExactly("Ingress");
    assertThat(np.getSpec().getPodSelector().getMatchLabels())
        .isEqualTo(d.getSpec().getSelector().getMatchLabels());
    var api = np.getSpec().getIngress().get(0);
    assertThat(api.getPorts().get(0).getPort().getIntVal())
        .isEqualTo(
            d.getSpec()
                .getTemplate()
                .getSpec()
                .getContainers()
                .get(0)
                .getPorts()
                .get(0)
                .getContainerPort());
    Set<String> reached = new TreeSet<>();
    api.getFrom().stream()
        .filter(p -> p.getNamespaceSelector() != null)
        .forEach(
            p -> {
              reached.add(
                  p.getNamespaceSelector().getMatchLabels().get("kubernetes.io/metadata.name"));
              assertThat(p.getPodSelector().getMatchExpressions())
                  .singleElement()
                  .satisfies(e -> assertThat(e.getKey()).isEqualTo("oneshot.io/build"));
            });
    Set<String> buildNamespaces = new TreeSet<>();
    all(objs, Role.class).forEach(r -> buildNamespaces.add(r.getMetadata().getNamespace()));
    assertThat(reached).isEqualTo(buildNamespaces).hasSizeGreaterThan(1);
    // The metrics port: from the dispatcher's own namespace alone, never from build pods.
    var metrics = np.getSpec().getIngress().get(1);
    assertThat(metrics.getPorts())
        .singleElement()
        .satisfies(
            p ->
                assertThat(p.getPort().getIntVal())
                    .isEqualTo(
                        d
                            .getSpec()
                            .getTemplate()
                            .getSpec()
                            .getContainers()
                            .get(0)
                            .getPorts()
                            .stream()
                            .filter(c -> c.getName().equals("metrics"))
                            .findFirst()
                            .orElseThrow()
                            .getContainerPort()));
    assertThat(metrics.getFrom())
        .singleElement()
        .satisfies(
            f -> {
              assertThat(f.getNamespaceSelector()).isNull();
              assertThat(f.getPodSelector().getMatchLabels()).isNullOrEmpty();
            });
    assertThat(np.getSpec().getIngress()).hasSize(3);
  }

  /** Values that turn every optional object and extension point of the chart on. */
  private Path everythingOn() throws IOException {
    Path values = tmp.resolve("everything.yaml");
    Files.writeString(
        values,
        """
        networkPolicy: {enabled: true}
        serviceMonitor: {enabled: true}
        prometheusRule: {enabled: true}
        grafanaDashboard: {enabled: true}
        ingress: {enabled: true, host: oneshot.example.com, className: nginx, tls: {secretName: oneshot-tls}}
        database: {url: "postgresql://oneshot:secret@db:5432/oneshot"}
        extraCaCerts: {secret: corp-ca}
        """
            + POD_EXTENSIONS);
    return values;
  }

  @Test
  void everyObjectTheChartMakesAndEveryJobItsRoutesLaunchMeetTheKubernetesSchema()
      throws IOException {
    Map<String, Path> cases = new java.util.LinkedHashMap<>();
    cases.put("defaults", null);
    cases.put("everything on", everythingOn());
    for (Path example : List.of(ORGS, GPU, OWN_IMAGE, CODER)) {
      cases.put(example.getFileName().toString(), example);
    }
    List<JsonNode> objects = new java.util.ArrayList<>();
    List<String> from = new java.util.ArrayList<>();
    for (var c : cases.entrySet()) {
      java.util.function.UnaryOperator<com.marcnuri.helm.TemplateCommand> values =
          c.getValue() == null ? t -> t : t -> t.withValuesFile(c.getValue());
      Chart.Rendered rendered = Chart.renderBoth(values);
      for (JsonNode doc : rendered.documents()) {
        objects.add(doc);
        from.add(c.getKey());
      }
      // What the dispatcher would launch on each route: the token Secret and the Job.
      Path root = tmp.resolve("config-" + from.size());
      OneshotConfig config = loadLikeTheDispatcher(rendered.objects(), root);
      Path templates =
          root.resolve(config.launcher().kubernetes().templateDir().toString().substring(1));
      for (HasMetadata o :
          io.oneshot.launch.kubernetes.LaunchObjects.forEveryRoute(config, templates)) {
        objects.add(YAML.readTree(K8S.asJson(o)));
        from.add(c.getKey() + ", launched");
      }
    }
    List<KubeSchema.Verdict> verdicts = KubeSchema.validate(objects);

    List<String> errors = new java.util.ArrayList<>();
    Set<String> checked = new TreeSet<>();
    Set<String> unchecked = new TreeSet<>();
    for (int i = 0; i < verdicts.size(); i++) {
      KubeSchema.Verdict v = verdicts.get(i);
      if (!v.schema()) {
        unchecked.add(v.apiVersion() + " " + v.kind());
      } else {
        checked.add(v.kind());
        for (String e : v.errors()) {
          errors.add(from.get(i) + ": " + v.kind() + " " + v.name() + ": " + e);
        }
      }
    }
    assertThat(errors).as("objects the API server would refuse").isEmpty();
    // Only the Prometheus operator's kinds are outside Kubernetes' own schema.
    assertThat(unchecked)
        .containsExactlyInAnyOrder(
            "monitoring.coreos.com/v1 PrometheusRule", "monitoring.coreos.com/v1 ServiceMonitor");
    assertThat(checked)
        .contains(
            "Deployment",
            "Service",
            "ConfigMap",
            "Secret",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Ingress",
            "Job");
  }

  @Test
  void theSchemaCheckRefusesWhatAnApiServerWouldRefuse() {
    JsonNode broken =
        tree(
            """
            apiVersion: batch/v1
            kind: Job
            metadata: {name: broken}
            spec:
              backoffLimit: "none"
              template:
                spec:
                  restartPolicy: Never
                  containers:
                    - image: busybox
                      ports: [{containerPort: "http"}]
            """);
    KubeSchema.Verdict v = KubeSchema.validate(List.of(broken)).get(0);
    assertThat(v.schema()).isTrue();
    assertThat(v.errors())
        .contains(
            "/spec/backoffLimit must be integer",
            "/spec/template/spec/containers/0 must have required property name",
            "/spec/template/spec/containers/0/ports/0/containerPort must be integer");
  }

  @Test
  void anIngressWithTlsReachesTheApiServiceWhenAsked() {
    assertThat(kinds(render(t -> t))).doesNotContain("Ingress");
    List<HasMetadata> objs =
        render(
            t ->
                t.set("ingress.enabled", "true")
                    .set("ingress.host", "oneshot.example.com")
                    .set("ingress.className", "nginx")
                    .set("ingress.tls.secretName", "oneshot-tls"));
    Ingress ing = one(objs, Ingress.class, "oneshot");
    Service svc = one(objs, Service.class, "oneshot");
    assertThat(ing.getSpec().getIngressClassName()).isEqualTo("nginx");
    assertThat(ing.getSpec().getTls())
        .singleElement()
        .satisfies(
            tls -> {
              assertThat(tls.getSecretName()).isEqualTo("oneshot-tls");
              assertThat(tls.getHosts()).containsExactly("oneshot.example.com");
            });
    var rule = ing.getSpec().getRules().get(0);
    assertThat(rule.getHost()).isEqualTo("oneshot.example.com");
    var backend = rule.getHttp().getPaths().get(0).getBackend().getService();
    assertThat(backend.getName()).isEqualTo(svc.getMetadata().getName());
    assertThat(svc.getSpec().getPorts())
        .anyMatch(p -> p.getName().equals(backend.getPort().getName()));
    // Without a TLS Secret: plain HTTP, no tls section.
    Ingress plain =
        one(
            render(
                t -> t.set("ingress.enabled", "true").set("ingress.host", "oneshot.example.com")),
            Ingress.class,
            "oneshot");
    assertThat(plain.getSpec().getTls()).isEmpty();
    assertThatThrownBy(() -> render(t -> t.set("ingress.enabled", "true")))
        .hasMessageContaining("ingress.host: the host name the API is reached at");
  }

  @Test
  void everyDocumentedValueIsInTheChartsReadme() throws IOException {
    String readme = Files.readString(CHART.resolve("README.md"));
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("(?m)^\\s*# ([A-Za-z0-9_.]+) -- (.+)$")
            .matcher(Files.readString(CHART.resolve("values.yaml")));
    int documented = 0;
    while (m.find()) {
      documented++;
      assertThat(readme)
          .as("scripts/chart-readme writes the table")
          .contains("| `" + m.group(1) + "` | " + m.group(2) + " |");
    }
    assertThat(documented).isGreaterThan(40);
    // Every top-level key of values.yaml is documented.
    JsonNode values = YAML.readTree(CHART.resolve("values.yaml").toFile());
    values.properties().forEach(e -> assertThat(readme).contains("| `" + e.getKey() + "` |"));
  }
}
