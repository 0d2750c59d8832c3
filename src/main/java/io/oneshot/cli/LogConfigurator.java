package io.oneshot.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ConfiguratorRank;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.spi.ContextAwareBase;

/**
 * Logging for every oneshot command, set up in code (no XML to parse: a one-shot provisionerd
 * starts faster). Everything goes to stderr, since stdout is for command output and, in
 * provisionerd, the build's own log. {@code ONESHOT_LOG_LEVEL} sets oneshot's level (default INFO);
 * other libraries log warnings only.
 */
@ConfiguratorRank(ConfiguratorRank.CUSTOM_HIGH_PRIORITY)
public final class LogConfigurator extends ContextAwareBase implements Configurator {

  @Override
  public ExecutionStatus configure(LoggerContext context) {
    PatternLayoutEncoder encoder = new PatternLayoutEncoder();
    encoder.setContext(context);
    encoder.setPattern("%d{yyyy-MM-dd'T'HH:mm:ss.SSS'Z',UTC} %-5level %logger{0} - %msg%n");
    encoder.start();

    ConsoleAppender<ILoggingEvent> stderr = new ConsoleAppender<>();
    stderr.setContext(context);
    stderr.setName("stderr");
    stderr.setTarget("System.err");
    stderr.setEncoder(encoder);
    stderr.start();

    Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
    root.setLevel(Level.WARN);
    root.addAppender(stderr);
    String level = System.getenv("ONESHOT_LOG_LEVEL");
    context.getLogger("io.oneshot").setLevel(Level.toLevel(level, Level.INFO));
    return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
  }
}
