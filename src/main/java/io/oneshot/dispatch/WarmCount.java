package io.oneshot.dispatch;

import io.oneshot.config.Crons;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import java.time.Instant;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * How many balloons a route keeps now, and why, from its {@code warm} settings: the most of {@code
 * idle}, the schedule periods in force, {@code scaleFactor} times its live builds (launching or
 * running) rounded up, and its forecast; then bounded by {@code max}, the route's free slots and
 * the free slots of the global limit. A pure function of its inputs: the clock and the history are
 * given.
 */
public final class WarmCount {
  private WarmCount() {}

  /**
   * A route's count: {@code wanted} balloons, and {@code why} in words an operator reads ("idle 2;
   * schedule 30 8 * * 1-5 10 until 10:00 Europe/Berlin; ... -> 10, bounded by max 8 -> 8").
   */
  public record Count(int wanted, String why) {}

  /**
   * Counts one route's balloons.
   *
   * @param live the route's builds launching or running
   * @param globalFree the slots of {@code dispatch.maxConcurrent} not held by live builds nor by
   *     the balloons of routes counted before this one
   * @param forecast the forecast's figure, when the route has one
   */
  public static Count count(
      OneshotConfig.Route route, Instant now, int live, int globalFree, OptionalInt forecast) {
    OneshotConfig.Warm warm = route.warm();
    List<String> why = new ArrayList<>();
    int demand = 0;
    if (warm.idle() > 0) {
      demand = warm.idle();
      why.add("idle " + warm.idle());
    }
    for (OneshotConfig.Period p : warm.schedule()) {
      ZonedDateTime at = now.atZone(p.timeZone());
      Optional<ZonedDateTime> start = Crons.periodStart(p.cron(), at, p.length());
      if (start.isPresent()) {
        demand = Math.max(demand, p.balloons());
        why.add(
            "schedule '"
                + p.cron()
                + "' "
                + p.balloons()
                + " until "
                + start.get().plus(p.length()).format(UNTIL)
                + " "
                + p.timeZone().getId());
      }
    }
    if (warm.scaleFactor() > 0) {
      int scaled = (int) Math.ceil(warm.scaleFactor() * live - 1e-9);
      demand = Math.max(demand, scaled);
      why.add("scaleFactor " + number(warm.scaleFactor()) + " x " + live + " live = " + scaled);
    }
    if (warm.forecast() != null && forecast.isPresent()) {
      OneshotConfig.Forecast f = warm.forecast();
      demand = Math.max(demand, forecast.getAsInt());
      why.add(
          "forecast p"
              + f.percentile()
              + " of "
              + f.weeks()
              + (f.weeks() == 1 ? " week" : " weeks")
              + " over the next "
              + Units.format(f.ahead())
              + " = "
              + forecast.getAsInt());
    }
    if (why.isEmpty()) {
      why.add("nothing asks for any now");
    }
    int wanted = demand;
    String bounds = "";
    if (warm.max() != null && wanted > warm.max()) {
      wanted = warm.max();
      bounds += ", bounded by max " + warm.max();
    }
    int routeFree = Math.max(0, route.maxConcurrent() - live);
    if (wanted > routeFree) {
      wanted = routeFree;
      bounds +=
          ", bounded by the route's free slots ("
              + route.maxConcurrent()
              + " - "
              + live
              + " live = "
              + routeFree
              + ")";
    }
    if (wanted > Math.max(0, globalFree)) {
      wanted = Math.max(0, globalFree);
      bounds += ", bounded by dispatch.maxConcurrent's free slots (" + wanted + ")";
    }
    return new Count(wanted, String.join("; ", why) + " -> " + demand + bounds);
  }

  private static final DateTimeFormatter UNTIL =
      DateTimeFormatter.ofPattern("EEE HH:mm", java.util.Locale.ROOT);

  private static String number(double d) {
    return d == Math.rint(d) ? Long.toString((long) d) : Double.toString(d);
  }

  /**
   * The forecast's figure from each week's peak (the most of the route's builds that held a slot at
   * once in that week's window): the {@code percentile} by nearest rank, or empty when no week has
   * history.
   */
  public static OptionalInt percentile(List<Integer> weeklyPeaks, int percentile) {
    if (weeklyPeaks.isEmpty()) {
      return OptionalInt.empty();
    }
    List<Integer> sorted = weeklyPeaks.stream().sorted().toList();
    int rank = (int) Math.ceil(percentile / 100.0 * sorted.size());
    return OptionalInt.of(sorted.get(Math.max(0, rank - 1)));
  }
}
