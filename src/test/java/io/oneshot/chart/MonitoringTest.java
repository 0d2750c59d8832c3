package io.oneshot.chart;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import io.oneshot.api.Json;
import io.oneshot.launch.kubernetes.KubernetesLauncher;
import io.oneshot.testing.Chart;
import io.oneshot.testing.Ports;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The chart's alerts and dashboard, rendered by Helm, read against what a dispatcher really exports
 * after builds of every kind (succeeded, failed, requeued) ran through the Kubernetes launcher.
 */
class MonitoringTest {
  private static final Path CHART = Chart.DIR;
  private static final Pattern METRIC = Pattern.compile("\\b(oneshot|jvm|process)_[a-z0-9_]+\\b");

  private static List<JsonNode> rendered;
  private static Set<String> exported;

  @TempDir static Path tmp;

  @BeforeAll
  static void renderAndRun() throws Exception {
    String yaml =
        new Helm(CHART)
            .template()
            .withName("ops")
            .withNamespace("oneshot")
            .set("prometheusRule.enabled", "true")
            .set("grafanaDashboard.enabled", "true")
            .call();
    rendered = new ArrayList<>();
    try (var parser = new YAMLFactory().createParser(yaml)) {
      new ObjectMapper(new YAMLFactory())
          .readValues(parser, JsonNode.class)
          .forEachRemaining(
              d -> {
                if (d != null && !d.isMissingNode() && !d.isNull()) {
                  rendered.add(d);
                }
              });
    }
    exported = scrapeAfterARun();
  }

  /** Runs a succeeded, a failed and a requeued build through Jobs, then scrapes /metrics. */
  private static Set<String> scrapeAfterARun() throws IOException {
    int port = Ports.stable();
    try (MockCluster cluster =
            new MockCluster(List.of("team-a"), Files.createDirectories(tmp.resolve("kubelet")));
        TestServer t =
            TestServer.with()
                .api(
                    "{listen: \"127.0.0.1:%d\", publicUrl: \"http://127.0.0.1:%d\", adminToken: \"%s\"}"
                        .formatted(port, port, TestServer.ADMIN_TOKEN))
                .launcherYaml(
                    "{kind: kubernetes, kubernetes: {namespace: team-a, templateDir: job-templates}}")
                .routes(
                    "routes: [{name: a, template: script.yaml, namespace: team-a, maxAttempts: 2,"
                        + " warm: {idle: 1}}]\n"
                        + "sources: [{name: coder, kind: coder, databaseUrl: '"
                        + new io.oneshot.testing.CoderDatabase().url
                        + "', routes: [{route: a, organization: acme}]}]")
                .launchers(
                    (vertx, cfg) ->
                        new io.oneshot.launch.kubernetes.Clusters(
                            cfg, c -> KubernetesLauncher.create(cfg, c, cluster.clientFor(vertx))))
                .start()) {
      cluster.kubelet.hold("oneshot-1-1");
      long requeued = t.api.submitScript("{}", "echo second try");
      await()
          .atMost(1, TimeUnit.MINUTES)
          .until(
              () ->
                  Sql.count(
                          "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ?"
                              + " AND text LIKE '%cannot be scheduled yet%'",
                          requeued)
                      == 1);
      cluster.kubelet.evict("team-a", "oneshot-1-1");
      long failed = t.api.submitScript("{}", "exit 2");
      List<Long> ids = List.of(requeued, failed);
      await()
          .atMost(2, TimeUnit.MINUTES)
          .until(() -> ids.stream().allMatch(id -> status(id).matches("succeeded|failed")));
      assertThat(status(requeued)).isEqualTo("succeeded");
      assertThat(status(failed)).isEqualTo("failed");
      // Counters are counted just after the database changes: wait until the scrape has them all.
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(() -> scrape(t).sum("oneshot_builds_total") == 2.0);
      return scrape(t).sampleNames();
    }
  }

  private static PromText scrape(TestServer t) {
    return PromText.parse(t.api.get("/metrics").text());
  }

  private JsonNode only(String kind) {
    List<JsonNode> found =
        rendered.stream().filter(d -> d.path("kind").asText().equals(kind)).toList();
    assertThat(found).as(kind).hasSize(1);
    return found.get(0);
  }

  private static Set<String> metricsIn(String promql) {
    Set<String> out = new TreeSet<>();
    Matcher m = METRIC.matcher(promql);
    while (m.find()) {
      out.add(m.group());
    }
    return out;
  }

  @Test
  void theChartPassesHelmLint() {
    LintResult r = new Helm(CHART).lint().strict().call();
    assertThat(r.isFailed()).as(String.join("\n", r.getMessages())).isFalse();
  }

  @Test
  void theAlertsReferOnlyToExportedMetrics() {
    JsonNode rule = only("PrometheusRule");
    List<String> alerts = new ArrayList<>();
    for (JsonNode group : rule.path("spec").path("groups")) {
      for (JsonNode r : group.path("rules")) {
        alerts.add(r.path("alert").asText());
        String expr = r.path("expr").asText();
        assertThat(metricsIn(expr)).as(expr).isNotEmpty();
        assertThat(exported).as(r.path("alert").asText()).containsAll(metricsIn(expr));
        assertThat(r.path("annotations").path("runbook_url").asText())
            .endsWith("docs/operating.md#" + r.path("alert").asText().toLowerCase());
      }
    }
    assertThat(alerts)
        .containsExactlyInAnyOrder(
            "OneshotQueueBacklog",
            "OneshotBuildFailureRate",
            "OneshotQueueWaitHigh",
            "OneshotBuildsSlow",
            "OneshotRequeues",
            "OneshotRunnerConflicts",
            "OneshotKubernetesApiErrors",
            "OneshotDispatcherMemoryHigh",
            "OneshotNoLeader",
            "OneshotListenerReconnecting",
            "OneshotClusterNotReady",
            "OneshotSourceDown",
            "OneshotSourceJobsUnrouted");
  }

  /** A Prometheus rules file of the chart's PrometheusRule, as one install renders it. */
  private static Path rulesOf(String namespace, Path dir) throws IOException {
    String yaml =
        new Helm(CHART)
            .template()
            .withName("ops")
            .withNamespace(namespace)
            .set("prometheusRule.enabled", "true")
            .call();
    ObjectMapper mapper = new ObjectMapper(new YAMLFactory());
    JsonNode rule = null;
    try (var parser = new YAMLFactory().createParser(yaml)) {
      for (var it = mapper.readValues(parser, JsonNode.class); it.hasNext(); ) {
        JsonNode d = it.next();
        if (d != null && "PrometheusRule".equals(d.path("kind").asText())) {
          rule = d;
        }
      }
    }
    assertThat(rule).as("a PrometheusRule in the " + namespace + " install").isNotNull();
    Path file = dir.resolve(namespace + ".rules.yaml");
    mapper.writeValue(file.toFile(), rule.path("spec"));
    return file;
  }

  private static String run(Path dir, String... command) throws Exception {
    Process p =
        new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor()).as(String.join(" ", command) + "\n" + out).isZero();
    return out;
  }

  /**
   * The alerts as Prometheus evaluates them, two installs in one Prometheus: promtool checks each
   * install's rules and runs the unit tests of {@code charts/oneshot/tests/alerts.test.yaml}.
   */
  @Test
  void twoInstallsInOnePrometheusAlertApartUnderPromtool() throws Exception {
    boolean found;
    try {
      found = new ProcessBuilder("promtool", "--version").start().waitFor() == 0;
    } catch (IOException e) {
      found = false;
    }
    io.oneshot.testing.Required.tool(
        found,
        "ONESHOT_REQUIRE_PROMTOOL",
        "promtool is not on PATH (Debian's prometheus package)",
        "the rule tests are skipped");
    Path dir = Files.createDirectories(tmp.resolve("promtool"));
    for (String ns : List.of("team-a", "team-b")) {
      assertThat(run(dir, "promtool", "check", "rules", rulesOf(ns, dir).toString()))
          .contains("SUCCESS");
    }
    Files.copy(CHART.resolve("tests/alerts.test.yaml"), dir.resolve("alerts.test.yaml"));
    assertThat(run(dir, "promtool", "test", "rules", "alerts.test.yaml")).contains("SUCCESS");
  }

  @Test
  void everyAlertHasARunbookInTheOperatorsGuide() throws IOException {
    String guide = Files.readString(Path.of("docs", "operating.md"));
    for (JsonNode group : only("PrometheusRule").path("spec").path("groups")) {
      for (JsonNode r : group.path("rules")) {
        assertThat(guide).contains("### " + r.path("alert").asText() + "\n");
      }
    }
  }

  @Test
  void theDashboardRefersOnlyToExportedMetricsAndRealColumns() {
    JsonNode map =
        rendered.stream()
            .filter(d -> d.path("metadata").path("name").asText().equals("ops-oneshot-dashboard"))
            .findFirst()
            .orElseThrow();
    assertThat(map.path("metadata").path("labels").path("grafana_dashboard").asText())
        .isEqualTo("1");
    JsonNode dashboard = Json.tree(map.path("data").path("oneshot.json").asText());
    List<String> titles = new ArrayList<>();
    Set<String> used = new TreeSet<>();
    for (JsonNode panel : dashboard.path("panels")) {
      titles.add(panel.path("title").asText());
      for (JsonNode target : panel.path("targets")) {
        if (target.has("expr")) {
          String expr = target.path("expr").asText();
          Set<String> names = metricsIn(expr);
          assertThat(names).as(expr).isNotEmpty();
          used.addAll(names);
          // One install at a time: every series read is the chosen namespace's and job's.
          Matcher series = METRIC.matcher(expr);
          while (series.find()) {
            assertThat(expr.substring(series.end()))
                .as(expr)
                .startsWith("{namespace=\"$namespace\",job=\"$job\"");
          }
        } else {
          // A table read from the oneshot database: its query runs against the real schema.
          Sql.rows(target.path("rawSql").asText());
        }
      }
    }
    assertThat(exported).containsAll(used);
    assertThat(used)
        .contains(
            "oneshot_builds_queued",
            "oneshot_builds_running",
            "oneshot_build_dispatch_seconds_bucket",
            "oneshot_build_start_seconds_bucket",
            "oneshot_builds_total",
            "oneshot_build_requeues_total");
    assertThat(titles).anyMatch(s -> s.toLowerCase().contains("slowest"));
    assertThat(used)
        .contains(
            "oneshot_build_duration_seconds_bucket",
            "oneshot_runner_conflicts_total",
            "jvm_memory_used_bytes",
            "jvm_gc_collection_seconds_sum",
            "oneshot_balloons_wanted",
            "oneshot_balloons",
            "oneshot_balloon_seconds_total",
            "oneshot_balloon_preemptions_total",
            "oneshot_team_running",
            "oneshot_team_share",
            "oneshot_team_borrowed",
            "oneshot_team_queued",
            "oneshot_team_held",
            "oneshot_route_held");
    List<String> variables = new ArrayList<>();
    dashboard.path("templating").path("list").forEach(v -> variables.add(v.path("name").asText()));
    assertThat(variables).contains("namespace", "job");
  }

  @Test
  void thePrometheusRuleIsValidYamlForTheOperator() {
    JsonNode rule = only("PrometheusRule");
    assertThat(rule.path("apiVersion").asText()).isEqualTo("monitoring.coreos.com/v1");
    assertThat(rule.path("metadata").path("name").asText()).isEqualTo("ops-oneshot");
    // Every duration the operator reads parses as a Prometheus duration.
    for (JsonNode r : rule.path("spec").path("groups").get(0).path("rules")) {
      if (r.has("for")) {
        assertThat(r.path("for").asText()).matches("[0-9]+[smh]");
      }
    }
    // Prometheus' own templates survive Helm's: the annotation still names the route.
    assertThat(rule.path("spec").path("groups").get(0).path("rules").get(0).path("annotations"))
        .anySatisfy(a -> assertThat(a.asText()).contains("{{ $labels.route }}"));
  }
}
