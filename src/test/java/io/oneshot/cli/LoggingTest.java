package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.testing.TestDatabase;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The log's format and levels, as a real process writes them to stderr. */
class LoggingTest {

  /** Runs {@code oneshot migrate} on an empty database (it logs each migration it applies). */
  private static List<String> migrate(Map<String, String> env) throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Dio.netty.noUnsafe=true",
            "-cp",
            System.getProperty("java.class.path"),
            "io.oneshot.cli.Main",
            "migrate",
            "--database-url",
            TestDatabase.fresh());
    pb.environment().keySet().removeIf(k -> k.startsWith("ONESHOT_LOG"));
    pb.environment().putAll(env);
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    Process p = pb.start();
    String err;
    try {
      err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      p.destroyForcibly();
      throw e;
    }
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(err).isZero();
    return err.lines().filter(l -> !l.isBlank()).toList();
  }

  @Test
  void textIsOneLinePerEvent() throws Exception {
    List<String> lines = migrate(Map.of());
    assertThat(lines)
        .isNotEmpty()
        .allMatch(l -> l.matches("\\d{4}-\\d\\d-\\d\\dT[0-9:.]+Z INFO  Migrator - Applied .*"));
  }

  @Test
  void jsonIsOneObjectPerLine() throws Exception {
    List<String> lines = migrate(Map.of("ONESHOT_LOG_FORMAT", "json"));
    assertThat(lines).isNotEmpty();
    List<String> messages = new ArrayList<>();
    for (String l : lines) {
      JsonNode event = Json.tree(l);
      assertThat(event.path("level").asText()).isEqualTo("INFO");
      assertThat(event.path("loggerName").asText()).isEqualTo("io.oneshot.build.Migrator");
      assertThat(event.path("timestamp").asLong()).isPositive();
      messages.add(event.path("formattedMessage").asText());
    }
    assertThat(messages).contains("Applied migration 1 (001_queue.sql).");
  }

  @Test
  void levelsAreSetPerPackage() throws Exception {
    assertThat(migrate(Map.of("ONESHOT_LOG_LEVELS", "io.oneshot.build=warn"))).isEmpty();
    assertThat(migrate(Map.of("ONESHOT_LOG_LEVELS", "io.oneshot.dispatch=warn"))).isNotEmpty();
  }
}
