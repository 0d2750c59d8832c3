package io.oneshot.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ConfiguratorRank;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import ch.qos.logback.core.encoder.LayoutWrappingEncoder;
import ch.qos.logback.core.spi.ContextAwareBase;
import java.util.LinkedHashMap;
import java.util.Map;
import org.slf4j.LoggerFactory;

/**
 * Logging for every oneshot command, set up in code (no XML to parse: a one-shot provisionerd
 * starts faster). Everything goes to stderr, since stdout is for command output and, in
 * provisionerd, the build's own log. One line per event; the format is {@code text} or {@code json}
 * (logback's JSON encoder: one object per line). {@code ONESHOT_LOG_FORMAT}, {@code
 * ONESHOT_LOG_LEVEL} (oneshot's level, default INFO) and {@code ONESHOT_LOG_LEVELS} ({@code
 * io.oneshot.dispatch=debug,io.vertx=info}) set it from the environment; the dispatcher's
 * configuration ({@code logging:}) can set the same, and the environment wins.
 */
@ConfiguratorRank(ConfiguratorRank.CUSTOM_HIGH_PRIORITY)
public final class LogConfigurator extends ContextAwareBase implements Configurator {

  @Override
  public ExecutionStatus configure(LoggerContext context) {
    Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
    root.setLevel(Level.WARN);
    root.addAppender(appender(context, System.getenv().getOrDefault("ONESHOT_LOG_FORMAT", "text")));
    context
        .getLogger("io.oneshot")
        .setLevel(Level.toLevel(System.getenv("ONESHOT_LOG_LEVEL"), Level.INFO));
    levels(context, parseLevels(System.getenv("ONESHOT_LOG_LEVELS")));
    return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
  }

  /**
   * Applies the configuration's logging settings, under those of the environment: a format, and
   * levels by logger (package) name.
   */
  public static void apply(String format, Map<String, String> levels) {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext context)) {
      return;
    }
    if (format != null && System.getenv("ONESHOT_LOG_FORMAT") == null) {
      Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
      root.detachAndStopAllAppenders();
      root.addAppender(appender(context, format));
    }
    Map<String, String> all = new LinkedHashMap<>(levels);
    all.putAll(parseLevels(System.getenv("ONESHOT_LOG_LEVELS")));
    levels(context, all);
  }

  private static ConsoleAppender<ILoggingEvent> appender(LoggerContext context, String format) {
    Encoder<ILoggingEvent> encoder;
    if ("json".equalsIgnoreCase(format)) {
      JsonEncoder json = new JsonEncoder();
      json.setContext(context);
      json.setWithSequenceNumber(false);
      json.setWithNanoseconds(false);
      json.setWithContext(false);
      json.setWithMessage(false);
      json.setWithArguments(false);
      json.setWithFormattedMessage(true);
      json.start();
      encoder = json;
    } else {
      LayoutWrappingEncoder<ILoggingEvent> text = new LayoutWrappingEncoder<>();
      text.setContext(context);
      TextLayout layout = new TextLayout();
      layout.setContext(context);
      layout.start();
      text.setLayout(layout);
      text.start();
      encoder = text;
    }
    ConsoleAppender<ILoggingEvent> stderr = new ConsoleAppender<>();
    stderr.setContext(context);
    stderr.setName("stderr");
    stderr.setTarget("System.err");
    stderr.setEncoder(encoder);
    stderr.start();
    return stderr;
  }

  private static void levels(LoggerContext context, Map<String, String> levels) {
    levels.forEach((name, level) -> context.getLogger(name).setLevel(Level.toLevel(level, null)));
  }

  /** {@code a.b=debug,c=info}; malformed pairs are ignored. */
  static Map<String, String> parseLevels(String spec) {
    Map<String, String> out = new LinkedHashMap<>();
    if (spec == null || spec.isBlank()) {
      return out;
    }
    for (String pair : spec.split(",")) {
      String[] kv = pair.strip().split("=", 2);
      if (kv.length == 2 && !kv[0].isBlank()) {
        out.put(kv[0].strip(), kv[1].strip());
      }
    }
    return out;
  }
}
