package io.oneshot.config;

import com.cronutils.model.Cron;
import com.cronutils.model.CronType;
import com.cronutils.model.definition.CronDefinitionBuilder;
import com.cronutils.model.time.ExecutionTime;
import com.cronutils.parser.CronParser;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Cron expressions of schedule periods, in the five fields of Unix cron (minute, hour, day of
 * month, month, day of week: {@code 30 8 * * 1-5}), read by cron-utils. A period starts at each
 * time the expression names, in the period's time zone (so 8:30 stays 8:30 across a change of
 * summer time), and lasts its length.
 */
public final class Crons {
  private static final CronParser PARSER =
      new CronParser(CronDefinitionBuilder.instanceDefinitionFor(CronType.UNIX));

  private static final Map<String, ExecutionTime> PARSED = new ConcurrentHashMap<>();

  private Crons() {}

  /**
   * The expression read, or an {@link IllegalArgumentException} saying what is wrong with it
   * (cron-utils' own words).
   */
  public static ExecutionTime parse(String expression) {
    ExecutionTime known = PARSED.get(expression);
    if (known != null) {
      return known;
    }
    Cron cron;
    try {
      cron = PARSER.parse(expression);
      cron.validate();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          e.getMessage() == null ? "not a cron expression" : e.getMessage(), e);
    }
    ExecutionTime t = ExecutionTime.forCron(cron);
    PARSED.put(expression, t);
    return t;
  }

  /**
   * When the period in force at {@code now} started: the latest time at or before {@code now} that
   * the expression names, if {@code now} is within {@code length} of it; empty when no period is in
   * force.
   */
  public static Optional<ZonedDateTime> periodStart(
      String expression, ZonedDateTime now, Duration length) {
    ExecutionTime t = parse(expression);
    ZonedDateTime minute = now.truncatedTo(ChronoUnit.MINUTES);
    Optional<ZonedDateTime> start = t.isMatch(minute) ? Optional.of(minute) : t.lastExecution(now);
    return start.filter(s -> now.isBefore(s.plus(length)));
  }
}
