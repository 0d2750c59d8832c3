package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** What every exactly-once test checks after the fact, read from the database and marker files. */
public final class Audit {
  private Audit() {}

  /**
   * The audit of one workspace: each version's serial above the one before, one lineage, every
   * version written by a build that ended.
   */
  public static void workspace(String workspace) {
    List<Map<String, Object>> v =
        Sql.rows(
            "SELECT s.version, s.serial, s.lineage, b.status FROM oneshot.workspace_states s"
                + " JOIN oneshot.builds b ON b.id = s.build_id WHERE s.workspace = ?"
                + " ORDER BY s.version",
            workspace);
    long last = -1;
    List<Object> lineages = new ArrayList<>();
    for (Map<String, Object> r : v) {
      long serial = (Long) r.get("serial");
      assertThat(serial).as("version %s", r.get("version")).isGreaterThan(last);
      last = serial;
      if (!lineages.contains(r.get("lineage"))) {
        lineages.add(r.get("lineage"));
      }
      assertThat((String) r.get("status")).isIn("succeeded", "failed", "canceled");
    }
    assertThat(lineages).hasSizeLessThanOrEqualTo(1);
  }

  /** How many second runners the build's timeline says were refused. */
  public static long conflicts(long buildId) {
    return Sql.count(
        "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
            + " AND reason LIKE 'a second runner was refused:%'",
        buildId);
  }

  /** How many calls with the build's token were refused as not from its runner (unproven). */
  public static long unproven(long buildId) {
    return Sql.count(
        "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
            + " AND reason LIKE 'a call with this attempt''s token was refused:%'",
        buildId);
  }

  /** The lines of a marker file a script appends to each time it runs; none if it never ran. */
  public static List<String> lines(Path file) {
    try {
      return Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : List.of();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
