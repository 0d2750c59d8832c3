package io.oneshot.process;

import com.sun.jna.Library;
import com.sun.jna.Native;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sends POSIX signals to processes and process groups through libc's {@code kill(2)}, so that
 * nothing depends on a {@code kill} command being installed (a slim runtime image has none, and
 * without it terraform would never get its SIGINT and would be killed before writing its state).
 * Where libc cannot be reached, SIGTERM and SIGKILL to a single process still go through {@link
 * ProcessHandle}; SIGINT and group signals then cannot be sent, which {@link #send} reports.
 */
public final class Signals {
  private static final Logger log = LoggerFactory.getLogger(Signals.class);

  /** The signals oneshot sends, with their numbers (the same on Linux and macOS). */
  public enum Signal {
    SIGINT(2),
    SIGKILL(9),
    SIGTERM(15);

    final int number;

    Signal(int number) {
      this.number = number;
    }
  }

  private interface LibC extends Library {
    int kill(int pid, int sig);
  }

  private static final LibC LIBC = load();

  private Signals() {}

  private static LibC load() {
    try {
      return Native.load("c", LibC.class);
    } catch (UnsatisfiedLinkError | RuntimeException e) {
      log.warn(
          "Cannot call libc's kill() ({}); SIGINT and process-group signals are not available.",
          e.toString());
      return null;
    }
  }

  /**
   * Sends {@code signal} to process {@code pid}. False: it could not be sent (or no such process).
   */
  public static boolean send(long pid, Signal signal) {
    if (LIBC != null) {
      return LIBC.kill((int) pid, signal.number) == 0;
    }
    return ProcessHandle.of(pid)
        .map(
            h ->
                switch (signal) {
                  case SIGTERM -> h.destroy();
                  case SIGKILL -> h.destroyForcibly();
                  case SIGINT -> false;
                })
        .orElse(false);
  }

  /**
   * Sends {@code signal} to every process in the group led by {@code pgid} (a process started with
   * {@code setsid}). False: it could not be sent, or the group is empty.
   */
  public static boolean sendGroup(long pgid, Signal signal) {
    return LIBC != null && LIBC.kill(-(int) pgid, signal.number) == 0;
  }

  /**
   * Runs {@code handler} on the JVM's signal thread whenever this process gets the signal {@code
   * name} ("TERM"), in place of the JVM's own handling (for TERM: shutting down). Through {@code
   * sun.misc.Signal}, by reflection: it is the JDK's supported way (module jdk.unsupported), and
   * compiled against directly it is a warning the build treats as an error. Returns what puts the
   * handling from before back; null when the JVM does not allow it (started with -Xrs, or without
   * that module).
   */
  public static Runnable handle(String name, Runnable handler) {
    try {
      Class<?> signal = Class.forName("sun.misc.Signal");
      Class<?> type = Class.forName("sun.misc.SignalHandler");
      Object h =
          java.lang.reflect.Proxy.newProxyInstance(
              type.getClassLoader(),
              new Class<?>[] {type},
              (proxy, method, args) -> {
                if (method.getName().equals("handle")) {
                  handler.run();
                  return null;
                }
                return switch (method.getName()) {
                  case "hashCode" -> System.identityHashCode(proxy);
                  case "equals" -> proxy == args[0];
                  case "toString" -> "signal handler for SIG" + name;
                  default -> null;
                };
              });
      java.lang.reflect.Method handle = signal.getMethod("handle", signal, type);
      Object sig = signal.getConstructor(String.class).newInstance(name);
      Object before = handle.invoke(null, sig, h);
      return () -> {
        try {
          handle.invoke(null, sig, before);
        } catch (ReflectiveOperationException | RuntimeException e) {
          log.warn("Cannot restore the handling of SIG{}: {}.", name, e.toString());
        }
      };
    } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
      log.warn("Cannot handle SIG{} ({}); the JVM's own handling stays.", name, e.toString());
      return null;
    }
  }
}
