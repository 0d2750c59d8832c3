package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/** The counting rules of warm capacity, against a fixed clock. */
class WarmCountTest {
  private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");

  /** A route of the given {@code warm} block (flow YAML), on the Kubernetes launcher. */
  private static OneshotConfig.Route route(int maxConcurrent, String warm) {
    return ConfigLoader.parse(
            """
            api: {publicUrl: "http://127.0.0.1:8080"}
            launcher: {kind: kubernetes}
            routes:
              - {name: a, template: script.yaml, maxConcurrent: %d, warm: %s}
            """
                .formatted(maxConcurrent, warm),
            "test",
            Map.of())
        .routes()
        .get(0);
  }

  private static Instant berlin(int year, int month, int day, int hour, int minute) {
    return ZonedDateTime.of(year, month, day, hour, minute, 0, 0, BERLIN).toInstant();
  }

  private static int count(OneshotConfig.Route r, Instant at, int live) {
    return WarmCount.count(r, at, live, 1000, OptionalInt.empty()).wanted();
  }

  private static final String MORNINGS =
      "{idle: 2, schedule: [{cron: \"30 8 * * 1-5\", length: 90m, timeZone: Europe/Berlin,"
          + " balloons: 10}]}";

  @Test
  void aWeekdayMorningPeriodHoldsItsCountFromItsStartToItsEndInItsTimeZone() {
    OneshotConfig.Route r = route(50, MORNINGS);
    // Monday 30 November 2026
    assertThat(count(r, berlin(2026, 11, 30, 8, 29), 0)).as("a minute before").isEqualTo(2);
    assertThat(count(r, berlin(2026, 11, 30, 8, 30), 0)).as("at its start").isEqualTo(10);
    assertThat(count(r, berlin(2026, 11, 30, 9, 59), 0)).as("at its last minute").isEqualTo(10);
    assertThat(count(r, berlin(2026, 11, 30, 10, 0), 0)).as("at its end").isEqualTo(2);
    assertThat(count(r, berlin(2026, 12, 5, 9, 0), 0)).as("on a Saturday").isEqualTo(2);
    // In UTC the same period starts at 7:30 in winter and 6:30 in summer.
    Instant winter = Instant.parse("2026-12-01T07:30:00Z");
    Instant summer = Instant.parse("2026-07-01T06:30:00Z");
    assertThat(count(r, winter, 0)).isEqualTo(10);
    assertThat(count(r, summer, 0)).isEqualTo(10);
    assertThat(count(r, summer.minusSeconds(60), 0)).isEqualTo(2);
    // The day summer time begins (Sunday 29 March 2026) is no weekday; the Monday after keeps 8:30.
    assertThat(count(r, berlin(2026, 3, 30, 8, 30), 0)).isEqualTo(10);
    assertThat(WarmCount.count(r, berlin(2026, 11, 30, 9, 0), 0, 1000, OptionalInt.empty()).why())
        .isEqualTo("idle 2; schedule '30 8 * * 1-5' 10 until Mon 10:00 Europe/Berlin -> 10");
  }

  @Test
  void overlappingPeriodsKeepTheMostAndAPeriodLongerThanItsRepeatsNeverLapses() {
    OneshotConfig.Route r =
        route(
            50,
            "{schedule: [{cron: \"0 9 * * *\", length: 25h, balloons: 3},"
                + " {cron: \"0 12 * * *\", length: 1h, balloons: 7}]}");
    assertThat(count(r, Instant.parse("2026-12-01T08:59:00Z"), 0)).isEqualTo(3);
    assertThat(count(r, Instant.parse("2026-12-01T12:30:00Z"), 0)).isEqualTo(7);
    assertThat(count(r, Instant.parse("2026-12-01T13:00:00Z"), 0)).isEqualTo(3);
  }

  @Test
  void scaleFactorGivesRoomForThatShareOfTheLiveBuildsRoundedUp() {
    OneshotConfig.Route r = route(50, "{idle: 1, scaleFactor: 0.5}");
    Instant at = Instant.parse("2026-12-01T00:00:00Z");
    assertThat(count(r, at, 0)).isEqualTo(1);
    assertThat(count(r, at, 1)).as("ceil(0.5)").isEqualTo(1);
    assertThat(count(r, at, 3)).as("ceil(1.5)").isEqualTo(2);
    assertThat(count(r, at, 10)).isEqualTo(5);
    // 0.28 x 25 is 7.000000000000001 in binary floating point: still 7 balloons, not 8.
    assertThat(count(route(50, "{scaleFactor: 0.28}"), at, 25)).as("exactly 7, not 8").isEqualTo(7);
  }

  @Test
  void theForecastCountsWhenItIsTheMost() {
    OneshotConfig.Route r = route(50, "{idle: 2, forecast: {weeks: 4, percentile: 75}}");
    Instant at = Instant.parse("2026-12-01T00:00:00Z");
    assertThat(WarmCount.count(r, at, 0, 1000, OptionalInt.of(6)).wanted()).isEqualTo(6);
    assertThat(WarmCount.count(r, at, 0, 1000, OptionalInt.of(1)).wanted()).isEqualTo(2);
    assertThat(WarmCount.count(r, at, 0, 1000, OptionalInt.empty()).wanted()).isEqualTo(2);
    assertThat(WarmCount.count(r, at, 0, 1000, OptionalInt.of(6)).why())
        .isEqualTo("idle 2; forecast p75 of 4 weeks over the next 15m = 6 -> 6");
  }

  @Test
  void everyCountIsBoundedByMaxTheRoutesFreeSlotsAndTheGlobalOnes() {
    Instant at = berlin(2026, 11, 30, 9, 0);
    OneshotConfig.Route capped = route(50, MORNINGS.replace("{idle: 2,", "{idle: 2, max: 4,"));
    WarmCount.Count c = WarmCount.count(capped, at, 0, 1000, OptionalInt.empty());
    assertThat(c.wanted()).isEqualTo(4);
    assertThat(c.why()).endsWith("-> 10, bounded by max 4");
    OneshotConfig.Route small = route(12, MORNINGS);
    c = WarmCount.count(small, at, 5, 1000, OptionalInt.empty());
    assertThat(c.wanted()).as("12 slots, 5 live").isEqualTo(7);
    assertThat(c.why()).endsWith("bounded by the route's free slots (12 - 5 live = 7)");
    assertThat(count(small, at, 12)).as("no free slot").isZero();
    assertThat(count(small, at, 20)).as("more live than the limit (it was lowered)").isZero();
    c = WarmCount.count(route(50, MORNINGS), at, 0, 3, OptionalInt.empty());
    assertThat(c.wanted()).isEqualTo(3);
    assertThat(c.why()).endsWith("bounded by dispatch.maxConcurrent's free slots (3)");
    assertThat(WarmCount.count(route(50, MORNINGS), at, 0, -2, OptionalInt.empty()).wanted())
        .isZero();
  }

  @Test
  void aRouteThatAsksForNothingNowKeepsNone() {
    OneshotConfig.Route r = route(50, "{scaleFactor: 1}");
    WarmCount.Count c = WarmCount.count(r, Instant.EPOCH, 0, 1000, OptionalInt.empty());
    assertThat(c.wanted()).isZero();
    assertThat(route(50, "{idle: 0}").warm().any()).isFalse();
    assertThat(route(50, "{idle: 3, max: 0}").warm().any()).isFalse();
    assertThat(
            ConfigLoader.parse("routes: [{name: a, maxConcurrent: 5}]", "test", Map.of())
                .routes()
                .get(0)
                .warm())
        .isEqualTo(OneshotConfig.Warm.NONE);
  }

  @Test
  void thePercentileIsTheNearestRankOfTheWeeksPeaks() {
    assertThat(WarmCount.percentile(List.of(), 75)).isEmpty();
    assertThat(WarmCount.percentile(List.of(4), 1)).hasValue(4);
    assertThat(WarmCount.percentile(List.of(8, 2, 10, 5), 75)).hasValue(8);
    assertThat(WarmCount.percentile(List.of(8, 2, 10, 5), 50)).hasValue(5);
    assertThat(WarmCount.percentile(List.of(8, 2, 10, 5), 100)).hasValue(10);
    assertThat(WarmCount.percentile(List.of(8, 2, 10, 5), 1)).hasValue(2);
  }
}
