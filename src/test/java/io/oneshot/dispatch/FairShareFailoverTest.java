package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.testing.DelegatingLauncher;
import io.oneshot.testing.Limits;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Fair share across a leader failover: three teams 1:2:1 flood a limit of 12 while two dispatchers
 * share the queue; the leader stops mid-flood and the other takes over. Counted from the builds'
 * own timelines: every build ran, none twice; no team ever ran past its cap or its share and
 * borrowLimit; and with the new leader, each team ran its share again.
 */
class FairShareFailoverTest {
  private static final String CONFIG =
      """
      teams:
        - {name: a, weight: 1, borrowLimit: 1}
        - {name: b, weight: 2}
        - {name: c, weight: 1}
      routes:
        - {name: ra, tags: {team: a}, team: a, maxConcurrent: 100, launchTimeout: 5s}
        - {name: rb, tags: {team: b}, team: b, maxConcurrent: 100, launchTimeout: 5s}
        - {name: rc, tags: {team: c}, team: c, maxConcurrent: 100, launchTimeout: 5s}
      """;

  private static final int GLOBAL = 12;

  private final List<TestServer> servers = new ArrayList<>();

  /** The runner's calls go to the replica that stays, whichever one launched the attempt. */
  private volatile String stays;

  @AfterEach
  void stop() {
    servers.forEach(TestServer::close);
    Limits.untrack();
  }

  @Test
  void sharesHoldAcrossALeaderFailoverMidFlood() {
    NoopLauncher runs = new NoopLauncher().heartbeats(1, Duration.ofMillis(200));
    String dispatch = "maxConcurrent: " + GLOBAL + ", pollInterval: 500ms, rescueInterval: 1s";
    TestServer first =
        TestServer.with().dispatch(dispatch).routes(CONFIG).launcher(shared(runs, false)).start();
    servers.add(first);
    await().atMost(20, TimeUnit.SECONDS).until(first.server::leader);
    TestServer second =
        TestServer.with()
            .dispatch(dispatch)
            .routes(CONFIG)
            .launcher(shared(runs, true))
            .keepQueue()
            .start();
    servers.add(second);
    stays = second.api.base();
    Limits.track();

    Sql.exec(
        "INSERT INTO oneshot.builds (route, tags, input) SELECT r, '{}'::jsonb,"
            + " '{\"provisioner\": \"script\", \"command\": [\"true\"]}'::jsonb"
            + " FROM (SELECT 'ra' AS r, generate_series(1, 60) UNION ALL"
            + " SELECT 'rb', generate_series(1, 120) UNION ALL"
            + " SELECT 'rc', generate_series(1, 60)) x ORDER BY random();"
            + " SELECT pg_notify('oneshot_builds', '')");
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NOT NULL")
                    >= 60);
    first.close();
    servers.remove(first);
    long failover = System.currentTimeMillis();
    await().atMost(60, TimeUnit.SECONDS).until(second.server::leader);
    await()
        .atMost(3, TimeUnit.MINUTES)
        .until(
            () -> Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);

    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'"))
        .as("every build ran to its end")
        .isEqualTo(240);
    assertThat(runs.completed.get()).as("and no build's runner completed twice").isEqualTo(240);
    Map<String, Integer> max = Limits.maxConcurrency();
    assertThat(max.get("global")).isLessThanOrEqualTo(GLOBAL);
    // a's share of 12 by weight 1 of 4 is 3, and it may borrow 1.
    assertThat(max.get("team:a")).isLessThanOrEqualTo(4);

    // After the new leader's first claims, while every team still had builds to claim: each team
    // ran within one build of its share (3, 6, 3) right after each claim.
    List<double[]> spans = spans();
    double start = failover + 1_000;
    double end = Double.MAX_VALUE;
    for (int team = 0; team < 3; team++) {
      final int t = team;
      end =
          Math.min(
              end, spans.stream().filter(s -> s[0] == t).mapToDouble(s -> s[1]).max().orElse(0));
    }
    int checked = 0;
    double[] shares = {3, 6, 3};
    for (double[] claim : spans) {
      if (claim[1] < start || claim[1] >= end) {
        continue;
      }
      int[] live = new int[3];
      for (double[] s : spans) {
        if (s[1] <= claim[1] && s[2] > claim[1]) {
          live[(int) s[0]]++;
        }
      }
      if (live[0] + live[1] + live[2] < GLOBAL) {
        continue; // within a claim of several builds, or a slot freed and not yet taken
      }
      checked++;
      for (int team = 0; team < 3; team++) {
        assertThat(Math.abs(live[team] - shares[team]))
            .as("team %d at %.0f: %s", team, claim[1], java.util.Arrays.toString(live))
            .isLessThanOrEqualTo(1.0);
      }
    }
    assertThat(checked).as("claims that filled the limit after the failover").isPositive();
  }

  /**
   * One runner for both replicas, as a cluster's pods are: its attempts call the replica that stays
   * whichever launched them, and it stops with that replica ({@code owner}).
   */
  private DelegatingLauncher shared(NoopLauncher runs, boolean owner) {
    return new DelegatingLauncher(runs) {
      @Override
      public LaunchOutcome launch(Attempt a) {
        return super.launch(
            new Attempt(a.buildId(), a.attempt(), a.name(), a.route(), a.token(), stays, a.pod()));
      }

      @Override
      public void close() {
        if (owner) {
          super.close();
        }
      }
    };
  }

  private static boolean live(Object status) {
    return "launching".equals(status) || "running".equals(status);
  }

  /** Every attempt's time live, from the timeline: {team 0..2, from ms, to ms}. */
  private static List<double[]> spans() {
    Map<String, double[]> open = new HashMap<>();
    List<double[]> out = new ArrayList<>();
    for (Map<String, Object> e :
        Sql.rows(
            "SELECT e.build_id, e.attempt, e.from_status, e.to_status, b.route,"
                + " extract(epoch FROM e.at) * 1000 AS at"
                + " FROM oneshot.build_events e JOIN oneshot.builds b ON b.id = e.build_id"
                + " WHERE e.from_status IS DISTINCT FROM e.to_status ORDER BY e.id")) {
      String key = e.get("build_id") + "/" + e.get("attempt");
      double at = ((Number) e.get("at")).doubleValue();
      boolean nowLive = live(e.get("to_status"));
      boolean wasLive = live(e.get("from_status"));
      if (nowLive && !wasLive) {
        int team = "ra".equals(e.get("route")) ? 0 : "rb".equals(e.get("route")) ? 1 : 2;
        open.put(key, new double[] {team, at, Double.MAX_VALUE});
      } else if (wasLive && !nowLive) {
        double[] s = open.remove(key);
        if (s != null) {
          s[2] = at;
          out.add(s);
        }
      }
    }
    out.addAll(open.values());
    out.sort((x, y) -> Double.compare(x[1], y[1]));
    return out;
  }
}
