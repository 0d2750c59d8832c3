package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.PatternLayout;
import ch.qos.logback.classic.spi.LoggingEvent;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The text log line is the one logback's pattern layout wrote with the pattern it replaces. */
class TextLayoutTest {
  private final LoggerContext context = new LoggerContext();

  private PatternLayout pattern() {
    PatternLayout p = new PatternLayout();
    p.setContext(context);
    p.setPattern("%d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z',UTC} %-5level %logger{0} - %msg%n");
    p.start();
    return p;
  }

  private TextLayout text() {
    TextLayout t = new TextLayout();
    t.setContext(context);
    t.start();
    return t;
  }

  private LoggingEvent event(
      String logger, Level level, long at, String message, Throwable t, Object... args) {
    LoggingEvent e =
        new LoggingEvent(
            "fqcn", context.getLogger(logger), level, message, t, args.length == 0 ? null : args);
    e.setTimeStamp(at);
    return e;
  }

  @Test
  void writesWhatThePatternWrote() {
    List<LoggingEvent> events =
        List.of(
            event(
                "io.oneshot.provisionerd.Provisionerd",
                Level.INFO,
                0L,
                "Build {}: acquired.",
                null,
                7),
            event("io.oneshot.dispatch.Dispatcher", Level.WARN, 1_764_000_000_123L, "slow", null),
            event("Root", Level.ERROR, 1_764_000_000_999L, "a {} and {}", null, "x", 2),
            event("a.b.C", Level.DEBUG, 1_764_000_001_000L, "{} ünïcode", null, "é"),
            event("a.b.C", Level.TRACE, 86_399_999L, "", null));
    PatternLayout before = pattern();
    TextLayout now = text();
    for (LoggingEvent e : events) {
      assertThat(now.doLayout(e)).isEqualTo(before.doLayout(e));
    }
  }

  @Test
  void aThrowableFollowsTheLineAsThePatternWroteIt() {
    Exception cause = new IllegalArgumentException("inner");
    Exception thrown = new IllegalStateException("outer", cause);
    LoggingEvent e =
        event("io.oneshot.provisionerd.Provisionerd", Level.ERROR, 5L, "failed.", thrown);
    String now = text().doLayout(e);
    assertThat(now).isEqualTo(pattern().doLayout(e));
    assertThat(now).contains("java.lang.IllegalStateException: outer", "Caused by: ", "inner");
  }
}
