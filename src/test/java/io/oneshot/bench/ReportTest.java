package io.oneshot.bench;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the benchmark's report says is a reference (a peer or a ceiling) and what is not. */
class ReportTest {
  @TempDir Path dir;

  @Test
  void aCaseDeclaredAReferenceMarksItsFiguresAddedBeforeAndAfterAndNoOtherCase() {
    Report r = new Report(false, Map.of());
    r.add("s", "bare", "before", 1, "ms");
    r.add("s", "ours", "rate", 2, "/s");
    r.reference("s", "bare");
    r.add("s", "bare", "after", 3, "ms");
    r.add("t", "bare", "same case name, other scenario", 4, "ms");

    assertThat(r.figures())
        .extracting(f -> f.metric() + "=" + f.reference())
        .containsExactly(
            "before=true", "rate=false", "after=true", "same case name, other scenario=false");
  }

  @Test
  void aFigureCopiedFromAnotherReportKeepsItsMarkAndTakesThisReportsCases() {
    Report aside = Report.scratch();
    aside.reference("s", "peer");
    aside.add("s", "peer", "their rate", 5, "/s");
    aside.add("s", "ours", "our rate", 6, "/s");
    aside.add("s", "late", "declared here", 7, "/s");

    Report r = new Report(false, Map.of());
    r.reference("s", "late");
    aside.figures().forEach(r::add);

    assertThat(r.figures()).extracting(Report.Figure::reference).containsExactly(true, false, true);
  }

  @Test
  void theTableAndTheJsonSayWhichFiguresAreReferencesAndAGoalStillShows() throws Exception {
    Report r = new Report(false, Map.of());
    r.addReference("s", "mixed", "plain client", 10, "/s");
    r.add("s", "mixed", "oneshot", 12, "/s", Report.Goal.atLeast(11));
    r.add("s", "mixed", "unmarked", 1, "");

    String md = r.markdown();
    assertThat(md).contains("| s | mixed | plain client | 10 /s | reference |");
    assertThat(md).contains("| s | mixed | oneshot | 12 /s | ≥ 11 /s ✓ |");
    assertThat(md).contains("| s | mixed | unmarked | 1  |  |");

    Path json = dir.resolve("bench.json");
    r.writeJson(json, Instant.EPOCH, "test");
    JsonNode figures = Json.MAPPER.readTree(Files.readString(json)).path("figures");
    assertThat(figures).hasSize(3);
    assertThat(
            List.of(figures.get(0).path("reference").asBoolean(), figures.get(1).has("reference")))
        .containsExactly(true, false);
    assertThat(figures.get(2).has("reference")).isFalse();
  }
}
