package io.oneshot.cli;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a long-running command alive until SIGTERM or Ctrl-C, then stops it once, cleanly, within a
 * grace period. A second signal, or the end of the grace period, ends the process at once: by then
 * nothing is left that could be lost (every change is a committed transition, and attempts run on
 * by themselves).
 */
final class Lifecycle {
  private static final Logger log = LoggerFactory.getLogger(Lifecycle.class);

  private Lifecycle() {}

  static void runUntilSignal(Runnable stop, Duration grace) throws InterruptedException {
    CountDownLatch signalled = new CountDownLatch(1);
    AtomicInteger signals = new AtomicInteger();
    boolean handled =
        Signals.handle(
            List.of("TERM", "INT"),
            name -> {
              if (signals.incrementAndGet() == 1) {
                log.info(
                    "SIG{}: stopping within {} s (a second signal stops at once).",
                    name,
                    grace.toSeconds());
                signalled.countDown();
              } else {
                log.warn("SIG{} again: stopping at once.", name);
                Runtime.getRuntime().halt(130);
              }
            });
    if (!handled) {
      // Without signal handlers, a shutdown hook still stops cleanly (a second signal waits).
      CountDownLatch stopped = new CountDownLatch(1);
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    try {
                      stopWithin(stop, grace);
                    } finally {
                      stopped.countDown();
                    }
                  },
                  "oneshot-shutdown"));
      stopped.await();
      return;
    }
    signalled.await();
    stopWithin(stop, grace);
  }

  private static void stopWithin(Runnable stop, Duration grace) {
    Thread watchdog =
        Thread.ofPlatform()
            .daemon()
            .name("oneshot-shutdown-deadline")
            .start(
                () -> {
                  try {
                    Thread.sleep(grace.toMillis());
                  } catch (InterruptedException e) {
                    return;
                  }
                  log.warn("Still stopping after {} s: stopping at once.", grace.toSeconds());
                  Runtime.getRuntime().halt(1);
                });
    try {
      stop.run();
    } finally {
      watchdog.interrupt();
    }
  }

  /**
   * The JDK's signal handlers ({@code sun.misc.Signal}, module jdk.unsupported), reached by
   * reflection: the compiler warns about any direct use of them, and a JDK without them still runs
   * oneshot (with shutdown hooks instead).
   */
  static final class Signals {
    private Signals() {}

    interface Handler {
      void handle(String name);
    }

    /** Installs {@code handler} for each signal; false when the JDK offers no such handlers. */
    static boolean handle(List<String> names, Handler handler) {
      try {
        Class<?> signal = Class.forName("sun.misc.Signal");
        Class<?> signalHandler = Class.forName("sun.misc.SignalHandler");
        Method getName = signal.getMethod("getName");
        InvocationHandler ih =
            (proxy, method, args) ->
                switch (method.getName()) {
                  case "handle" -> {
                    handler.handle((String) getName.invoke(args[0]));
                    yield null;
                  }
                  case "hashCode" -> System.identityHashCode(proxy);
                  case "equals" -> proxy == args[0];
                  case "toString" -> "oneshot signal handler";
                  default -> null;
                };
        Object proxy =
            Proxy.newProxyInstance(
                Lifecycle.class.getClassLoader(), new Class<?>[] {signalHandler}, ih);
        Method install = signal.getMethod("handle", signal, signalHandler);
        for (String name : names) {
          install.invoke(null, signal.getConstructor(String.class).newInstance(name), proxy);
        }
        return true;
      } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
        log.debug("No signal handlers ({}); stopping through a shutdown hook.", e.toString());
        return false;
      }
    }
  }
}
