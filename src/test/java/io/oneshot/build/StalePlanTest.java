package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.StoreFixture;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Statements that touch a batch of builds by id keep a plan that costs what the batch holds, even
 * when the table's statistics were taken before a burst made thousands of builds live: at 9:00 the
 * night's ANALYZE has seen none launching, so an estimate from a status index says a handful.
 */
class StalePlanTest {
  private StoreFixture f;

  @AfterEach
  void close() {
    if (f != null) {
      f.close();
    }
  }

  @Test
  void theLaunchRecordFindsItsBuildsByPrimaryKeyWhenTheStatisticsPredateTheBurst()
      throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 100000}]");
    f.enqueueNoops(3_000);
    io.oneshot.testing.Sql.exec("ANALYZE oneshot.builds");
    // The burst: 2,000 claimed after the statistics were taken, none of them recorded yet.
    assertThat(f.claim(100_000, 2_000, "noop")).hasSize(2_000);

    String text = Sql.load("attempts/mark-launched").text();
    try (Connection c = io.oneshot.testing.Sql.connect();
        Statement s = c.createStatement()) {
      s.execute("PREPARE record_launches AS " + text);
      String args =
          "(ARRAY[10, 20, 30, 40, 50, 60]::bigint[], ARRAY[1, 1, 1, 1, 1, 1],"
              + " ARRAY['noop', 'noop', 'noop', 'noop', 'noop', 'noop'],"
              + " ARRAY['a', 'b', 'c', 'd', 'e', 'f'], ARRAY[NULL, NULL, NULL, NULL, NULL, NULL],"
              + " ARRAY['x', 'x', 'x', 'x', 'x', 'x'])";
      for (String mode : new String[] {"force_custom_plan", "force_generic_plan"}) {
        s.execute("SET plan_cache_mode = " + mode);
        String plan;
        try (ResultSet r = s.executeQuery("EXPLAIN (FORMAT JSON) EXECUTE record_launches" + args)) {
          r.next();
          plan = r.getString(1);
        }
        assertThat(plan).as(mode).contains("\"builds_pkey\"").doesNotContain("\"builds_live\"");
        // And the statement still records exactly the launches it was given.
        s.execute("BEGIN");
        try (ResultSet r = s.executeQuery("EXECUTE record_launches" + args)) {
          int n = 0;
          while (r.next()) {
            n++;
          }
          assertThat(n).as(mode).isEqualTo(6);
        }
        s.execute("ROLLBACK");
      }
    }
  }
}
