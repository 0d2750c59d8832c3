package io.oneshot.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.testing.Heavy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code scripts/bench --smoke}: every scenario runs tiny, so that the benchmark never rots. Its
 * figures are not judged here (performance goals live in the benchmark's own report); what is
 * checked is that every scenario ran to the end and reported, in the table and in the JSON.
 */
@Heavy
class BenchSmokeTest {
  @TempDir Path out;

  @Test
  void everyScenarioRunsAndReports() throws Exception {
    Bench.Result r = Bench.run(true, List.of(), out);

    Set<String> reported = new TreeSet<>();
    for (Report.Figure f : r.report().figures()) {
      reported.add(f.scenario());
      assertThat(f.value()).as(f.toString()).isFinite().isGreaterThanOrEqualTo(0);
    }
    Set<String> all = new TreeSet<>(Bench.scenarios().stream().map(Scenario::name).toList());
    if (!io.oneshot.testing.Browser.available() && !io.oneshot.testing.Browser.required()) {
      // Without a browser the console's scenario cannot run (CI installs one and requires it).
      all.remove("console");
    }
    if (io.oneshot.testing.k8s.RealCluster.find().isEmpty()
        && !io.oneshot.testing.Required.required(io.oneshot.testing.k8s.RealCluster.REQUIRE)) {
      // Without the real node (scripts/kube start) its scenarios measure nothing (CI runs one).
      all.remove("real-node");
      all.remove("warm");
    }
    assertThat(r.failed().stream().filter(all::contains).toList())
        .as("scenarios that failed")
        .isEmpty();
    assertThat(reported).isEqualTo(all);
    // Every scenario prints what its figures are read against, measured in the same run.
    Set<String> withReference = new TreeSet<>();
    r.report().figures().stream()
        .filter(Report.Figure::reference)
        .forEach(f -> withReference.add(f.scenario()));
    assertThat(withReference).as("scenarios with a peer or ceiling beside them").isEqualTo(all);
    // The latency goal's limit is measured beside it, in the same run (LatencyFloor).
    Map<String, Double> latency = new HashMap<>();
    r.report().figures().stream()
        .filter(f -> f.scenario().equals("latency"))
        .forEach(f -> latency.put(f.metric(), f.value()));
    assertThat(latency)
        .containsKeys(
            "a round trip (SELECT 1) p50",
            "a one-row insert committed p50",
            "a notification, sent -> heard by a listener p50",
            "a bare claim of one row, committed p50",
            "enqueue -> claimed p50 ÷ the floor's notification + bare claim");
    assertThat(latency.get("notification + bare claim, p50 each, summed"))
        .isEqualTo(
            latency.get("a notification, sent -> heard by a listener p50")
                + latency.get("a bare claim of one row, committed p50"))
        .isPositive();

    JsonNode json = Json.MAPPER.readTree(Files.readString(out.resolve("bench.json")));
    assertThat(json.path("smoke").asBoolean()).isTrue();
    assertThat(json.path("machine").path("postgresql").asText()).startsWith("PostgreSQL");
    assertThat(json.path("figures")).hasSize(r.report().figures().size());
    assertThat(json.path("figures").findValuesAsText("scenario")).containsAll(all);
    long references = r.report().figures().stream().filter(Report.Figure::reference).count();
    assertThat(json.path("figures").findValues("reference")).hasSize((int) references);
    // Smoke figures never claim a goal was met or missed.
    assertThat(json.path("figures").findValues("met")).isEmpty();

    String md = Files.readString(out.resolve("bench.md"));
    assertThat(md.lines().filter(l -> l.startsWith("| ")).count())
        .isEqualTo(r.report().figures().size() + 1);
    for (String s : all) {
      assertThat(md).contains("| " + s + " |");
    }
  }

  /**
   * The backpressure scenario audits its route limit with a trigger on every event, which takes a
   * lock at each commit. Left installed, it made every scenario after it pay that lock: the drain
   * compared with db-scheduler ran a third slower in a full run than alone (PostgreSQL 0.43 ms of
   * CPU a build against 0.31).
   */
  @Test
  void theBackpressureScenarioLeavesNoAuditBehind() throws Exception {
    io.oneshot.testing.Limits.untrack();
    new BackpressureBench().run(true, Report.scratch());
    assertThat(io.oneshot.testing.Limits.tracking()).isFalse();
  }

  @Test
  void anUnknownScenarioIsRefusedBeforeAnythingRuns() {
    var err = new java.io.StringWriter();
    int code =
        new picocli.CommandLine(new Bench())
            .setErr(new java.io.PrintWriter(err))
            .execute("--only", "latency,nope", "--out", out.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("--only: no scenario nope");
    assertThat(out.resolve("bench.json")).doesNotExist();
  }
}
