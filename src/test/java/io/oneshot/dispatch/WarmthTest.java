package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildReads;
import io.oneshot.build.Database;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.WarmRoom;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The leader's warm-capacity loop against a room that records what it is told: who may set
 * balloons, how many, what is recorded for every replica, and what balloons cost.
 */
class WarmthTest {
  private static final String CONFIG =
      """
      api: {publicUrl: "http://127.0.0.1:8080"}
      dispatch: {maxConcurrent: 10, warmInterval: 10s}
      launcher: {kind: kubernetes}
      routes:
        - {name: a, tags: {t: a}, untagged: true, template: script.yaml, maxConcurrent: 6,
           warm: {idle: 4}}
        - {name: b, tags: {t: b}, template: script.yaml, maxConcurrent: 6,
           warm: {idle: 1, scaleFactor: 1, schedule: [{cron: "0 9 * * *", length: 1h, balloons: 8}]}}
        - {name: c, tags: {t: c}, template: script.yaml, maxConcurrent: 6}
      """;

  /** What a room was told, in order, and what it answers. */
  private static final class Room implements WarmRoom {
    final List<String> calls = new ArrayList<>();
    final Map<String, Observed> seen = new HashMap<>();
    String trouble;
    RuntimeException refuse;
    Listener listener;

    @Override
    public synchronized void hold(OneshotConfig.Route route, int count) {
      if (refuse != null && route.name().equals("a")) {
        throw refuse;
      }
      calls.add("hold " + route.name() + " " + count);
    }

    @Override
    public synchronized void release(Set<String> keep) {
      calls.add("release all but " + new java.util.TreeSet<>(keep));
    }

    @Override
    public synchronized Map<String, Observed> observed() {
      return Map.copyOf(seen);
    }

    @Override
    public String trouble() {
      return trouble;
    }

    @Override
    public void listen(Listener listener) {
      this.listener = listener;
    }
  }

  /** A clock the test moves. */
  private static final class Clock implements InstantSource {
    volatile Instant now = Instant.parse("2026-12-07T07:00:00Z");

    @Override
    public Instant instant() {
      return now;
    }
  }

  private final Room room = new Room();
  private final Clock clock = new Clock();

  /** The monotonic clock balloon time is measured on, in ns. */
  private final java.util.concurrent.atomic.AtomicLong nanos =
      new java.util.concurrent.atomic.AtomicLong();

  private final AtomicBoolean leading = new AtomicBoolean(true);
  private final Metrics metrics = new Metrics();
  private final List<String> notes = new ArrayList<>();
  private StoreFixture f;
  private Warmth warmth;

  private Warmth warmth() {
    f = new StoreFixture("routes: [{name: a, untagged: true}, {name: b, tags: {t: b}}]");
    OneshotConfig config = ConfigLoader.parse(CONFIG, "test", Map.of());
    AttemptEvents events =
        new AttemptEvents() {
          @Override
          public void changed(AttemptRef ref) {}

          @Override
          public synchronized void note(AttemptRef ref, Note note) {
            notes.add(ref.buildId() + ": " + note.text() + (note.milestone() ? " [step]" : ""));
          }
        };
    warmth =
        new Warmth(
            f.store, config, Optional.of(room), leading::get, metrics, events, clock, nanos::get);
    return warmth;
  }

  @AfterEach
  void tearDown() {
    if (warmth != null) {
      warmth.close();
    }
    if (f != null) {
      f.close();
    }
  }

  private Map<String, BuildReads.Warm> recorded() {
    Map<String, BuildReads.Warm> out = new LinkedHashMap<>();
    for (BuildReads.RouteStatus r : Database.await(f.store.reads().routes())) {
      if (r.warm() != null) {
        out.put(r.name(), r.warm());
      }
    }
    return out;
  }

  @Test
  void aFollowerNeverTouchesBalloonsNorRecordsThem() {
    Warmth w = warmth();
    leading.set(false);
    assertThat(w.pass()).isEmpty();
    assertThat(w.pass()).isEmpty();
    assertThat(room.calls).isEmpty();
    assertThat(recorded()).isEmpty();
    room.listener.preempted("a", "oneshot-balloons-a-1-x", "n1", Optional.empty());
    assertThat(room.calls).isEmpty();
    assertThat(metrics.scrape()).doesNotContain("oneshot_balloon_preemptions_total{route=\"a\"}");
  }

  @Test
  void theLeaderRemovesStrayBalloonsOncePerTermThenHoldsEachWarmRoutesCount() {
    Warmth w = warmth();
    w.pass();
    w.pass();
    assertThat(room.calls)
        .containsExactly("release all but [a, b]", "hold a 4", "hold b 1", "hold a 4", "hold b 1");
    room.calls.clear();
    leading.set(false);
    w.pass();
    leading.set(true);
    w.pass();
    assertThat(room.calls)
        .as("a new term removes strays again")
        .containsExactly("release all but [a, b]", "hold a 4", "hold b 1");
    assertThat(recorded().keySet()).containsExactly("a", "b");
    assertThat(recorded().get("a").why()).isEqualTo("idle 4 -> 4");
  }

  @Test
  void theGlobalLimitsFreeSlotsGoToTheWarmRoutesInConfigurationOrder() {
    Warmth w = warmth();
    clock.now = Instant.parse("2026-12-07T09:10:00Z");
    Map<String, WarmCount.Count> counts = w.pass();
    // b's period asks for 8, but a's 4 leave 6 of the global 10, and b's own limit is 6.
    assertThat(counts.get("a").wanted()).isEqualTo(4);
    assertThat(counts.get("b").wanted()).isEqualTo(6);
    f.enqueueNoops(3);
    f.claim(100, 3, "test");
    counts = w.pass();
    // Three of a live: a keeps 3 (6 - 3 free), the global limit has 10 - 3 - 3 = 4 for b.
    assertThat(counts.get("a").wanted()).isEqualTo(3);
    assertThat(counts.get("b").wanted()).isEqualTo(4);
    assertThat(counts.get("b").why())
        .endsWith("bounded by dispatch.maxConcurrent's free slots (4)");
    clock.now = Instant.parse("2026-12-07T10:00:00Z");
    assertThat(w.pass().get("b").wanted()).as("the period is over").isEqualTo(1);
  }

  @Test
  void runningBalloonsTimeIsAddedUpAndALongGapIsNotCounted() {
    Warmth w = warmth();
    room.seen.put("a", new WarmRoom.Observed(4, 3, 1));
    w.pass();
    nanos.addAndGet(10_000_000_000L);
    w.pass();
    nanos.addAndGet(20_000_000_000L);
    // The schedule's clock is not what balloon time is measured on.
    clock.now = clock.now.plusSeconds(7200);
    w.pass();
    // 3 running for 30 s.
    assertThat(recorded().get("a").balloonHours()).isCloseTo(90 / 3600.0, within());
    // A gap longer than three intervals (no leader, a stalled pass) counts as three.
    nanos.addAndGet(3_600_000_000_000L);
    w.pass();
    assertThat(recorded().get("a").balloonHours()).isCloseTo((90 + 90) / 3600.0, within());
    assertThat(recorded().get("a").running()).isEqualTo(3);
    assertThat(recorded().get("a").pending()).isEqualTo(1);
    assertThat(
            PromText.parse(metrics.scrape()).value("oneshot_balloon_seconds_total", "route", "a"))
        .isEqualTo(180.0);
    assertThat(
            PromText.parse(metrics.scrape())
                .value("oneshot_balloons", "route", "a", "state", "running"))
        .isEqualTo(3.0);
    // A follower exports no balloon gauges.
    leading.set(false);
    w.pass();
    assertThat(metrics.scrape()).doesNotContain("oneshot_balloons{");
  }

  private static org.assertj.core.data.Offset<Double> within() {
    return org.assertj.core.data.Offset.offset(1e-9);
  }

  @Test
  void aBuildsPodThatTookABalloonsPlaceIsAStepInItsTimelineAndCounted() {
    Warmth w = warmth();
    w.pass();
    AttemptRef ref = new AttemptRef(42, 1, "oneshot-42-1", "ns");
    room.listener.preempted("a", "oneshot-balloons-a-5d8-x2", "node-1", Optional.of(ref));
    room.listener.preempted("a", "oneshot-balloons-a-5d8-x3", null, Optional.empty());
    assertThat(notes)
        .containsExactly(
            "42: its pod took the place of balloon oneshot-balloons-a-5d8-x2 on node node-1 (warm"
                + " room of route a) [step]");
    w.pass();
    assertThat(recorded().get("a").preemptions()).isEqualTo(2);
    assertThat(
            PromText.parse(metrics.scrape())
                .value("oneshot_balloon_preemptions_total", "route", "a"))
        .isEqualTo(2.0);
    w.pass();
    assertThat(recorded().get("a").preemptions()).as("counted once").isEqualTo(2);
  }

  @Test
  void balloonsThatCannotBeKeptAreNotAskedForAndSayWhy() {
    Warmth w = warmth();
    room.trouble = "PriorityClass oneshot-balloon does not exist";
    w.pass();
    assertThat(room.calls).containsExactly("release all but [a, b]");
    assertThat(recorded().get("a").trouble()).isEqualTo(room.trouble);
    assertThat(recorded().get("a").wanted()).isEqualTo(4);
    room.trouble = null;
    room.refuse = new IllegalStateException("forbidden: deployments.apps");
    room.calls.clear();
    w.pass();
    assertThat(room.calls)
        .as("one route refused, the next is still held")
        .containsExactly("hold b 1");
    assertThat(recorded().get("a").trouble())
        .isEqualTo("cannot keep its balloons: forbidden: deployments.apps");
    assertThat(recorded().get("b").trouble()).isNull();
  }

  @Test
  void nothingRunsWhereThereIsNoRoom() {
    f = new StoreFixture("routes: [{name: a, untagged: true}]");
    OneshotConfig config = ConfigLoader.parse("routes: [{name: a}]", "test", Map.of());
    warmth =
        new Warmth(
            f.store,
            config,
            Optional.empty(),
            () -> true,
            metrics,
            AttemptEvents.NONE,
            InstantSource.system());
    assertThat(warmth.pass()).isEmpty();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.route_warmth")).isZero();
  }
}
