package io.oneshot.cli;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.CoreConstants;
import ch.qos.logback.core.LayoutBase;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * The text log line: what the pattern {@code %d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z',UTC} %-5level
 * %logger{0} - %msg%n} writes, a stack trace after it when the event has one. Written out, because
 * starting logback's pattern layout (parsing the pattern, finding each converter by reflection) was
 * a tenth of a one-shot provisionerd's start.
 */
final class TextLayout extends LayoutBase<ILoggingEvent> {
  private static final DateTimeFormatter TIME =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  @Override
  public String doLayout(ILoggingEvent event) {
    StringBuilder line = new StringBuilder(128);
    TIME.formatTo(Instant.ofEpochMilli(event.getTimeStamp()), line);
    line.append(' ');
    String level = event.getLevel().toString();
    line.append(level);
    for (int i = level.length(); i < 5; i++) {
      line.append(' ');
    }
    String logger = event.getLoggerName();
    line.append(' ').append(logger, logger.lastIndexOf('.') + 1, logger.length());
    line.append(" - ").append(event.getFormattedMessage()).append(CoreConstants.LINE_SEPARATOR);
    IThrowableProxy thrown = event.getThrowableProxy();
    if (thrown != null) {
      line.append(ThrowableProxyUtil.asString(thrown));
    }
    return line.toString();
  }
}
