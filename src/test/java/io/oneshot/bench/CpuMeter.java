package io.oneshot.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The CPU a stretch of a scenario took, by whom: this JVM in all, the threads a predicate picks (by
 * name), and PostgreSQL when its server runs on this machine (every process named {@code postgres},
 * read from {@code /proc}: backends, WAL writer, checkpointer). A backend that exits within the
 * stretch takes its time with it; the scenarios keep their connections open while measured. The
 * JVM's own JIT and collector threads are read from {@code /proc/self/task} likewise.
 */
final class CpuMeter {
  /** /proc counts in USER_HZ, which Linux fixes at 100 a second for user space. */
  private static final double MS_PER_TICK = 10;

  /** utime and stime (fields 14 and 15 of a stat line), among the fields after its command. */
  private static final int UTIME = 11;

  private static final int STIME = 12;

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
  private static final com.sun.management.OperatingSystemMXBean OS =
      (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

  private final long jvm;
  private final Map<Long, Sample> postgres;
  private final Map<Long, Long> threads;
  private final Map<Long, Sample> vmThreads;
  private final long systemTicks;

  /**
   * The JVM's time in the kernel, its threads' system calls and what they wait on (sockets, wakes),
   * which a Java profiler does not sample.
   */
  private static final String SYSTEM = "the kernel (system time)";

  /**
   * The JVM's own threads, which the thread bean does not list, by their name in /proc (cut to 15
   * characters there).
   */
  private static final Map<String, Predicate<String>> VM_GROUPS = new java.util.LinkedHashMap<>();

  static {
    VM_GROUPS.put(
        "the JIT compiler", n -> n.startsWith("C1 Compiler") || n.startsWith("C2 Compiler"));
    VM_GROUPS.put(
        "the garbage collector",
        n -> n.startsWith("GC Thread") || n.startsWith("G1 ") || n.equals("VM Thread"));
  }

  private CpuMeter() {
    jvm = OS.getProcessCpuTime();
    postgres = postgresTicks();
    threads = threadNanos();
    vmThreads = vmTicks();
    systemTicks = systemTicks();
  }

  static CpuMeter start() {
    return new CpuMeter();
  }

  /** CPU milliseconds since the start: the JVM's and PostgreSQL's (-1: not on this machine). */
  record Used(double jvmMs, double postgresMs, Map<String, Double> byThreadGroupMs) {}

  /**
   * What was used since the start; {@code groups} name the JVM's threads to sum separately (a
   * thread counts in the first group whose test its name passes).
   */
  Used stop(Map<String, Predicate<String>> groups) {
    double jvmMs = (OS.getProcessCpuTime() - jvm) / 1e6;
    Map<Long, Sample> pgNow = postgresTicks();
    double pgMs = pgNow.isEmpty() ? -1 : msSince(postgres, pgNow, n -> true);
    Map<String, Double> byGroup = new java.util.LinkedHashMap<>();
    groups.keySet().forEach(g -> byGroup.put(g, 0.0));
    Map<Long, Long> now = threadNanos();
    for (ThreadInfo t : THREADS.getThreadInfo(now.keySet().stream().mapToLong(x -> x).toArray())) {
      if (t == null) {
        continue;
      }
      long used = now.get(t.getThreadId()) - threads.getOrDefault(t.getThreadId(), 0L);
      for (Map.Entry<String, Predicate<String>> g : groups.entrySet()) {
        if (g.getValue().test(t.getThreadName())) {
          byGroup.merge(g.getKey(), used / 1e6, Double::sum);
          break;
        }
      }
    }
    Map<Long, Sample> vmNow = vmTicks();
    if (!vmNow.isEmpty()) {
      VM_GROUPS.forEach((g, which) -> byGroup.put(g, msSince(vmThreads, vmNow, which)));
    }
    long systemNow = systemTicks();
    if (systemNow >= 0 && systemTicks >= 0) {
      byGroup.put(SYSTEM, (systemNow - systemTicks) * MS_PER_TICK);
    }
    return new Used(jvmMs, pgMs, byGroup);
  }

  /** This JVM's system time in ticks, from /proc/self/stat (-1 where there is none). */
  private static long systemTicks() {
    try {
      return Long.parseLong(afterCommand(Files.readString(Path.of("/proc/self/stat")))[STIME]);
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /**
   * The fields of a /proc stat line after its command (which may hold spaces and parentheses): the
   * state (field 3) first.
   */
  private static String[] afterCommand(String stat) {
    return stat.substring(stat.lastIndexOf(')') + 2).split(" ");
  }

  private static Map<Long, Long> threadNanos() {
    Map<Long, Long> out = new HashMap<>();
    for (long id : THREADS.getAllThreadIds()) {
      long ns = THREADS.getThreadCpuTime(id);
      if (ns >= 0) {
        out.put(id, ns);
      }
    }
    return out;
  }

  /** A process's or thread's name in /proc and its utime + stime, in ticks. */
  private record Sample(String name, long ticks) {}

  /**
   * CPU milliseconds from {@code before} to {@code now} of those whose name {@code which} picks.
   */
  private static double msSince(
      Map<Long, Sample> before, Map<Long, Sample> now, Predicate<String> which) {
    long ticks = 0;
    for (Map.Entry<Long, Sample> e : now.entrySet()) {
      if (which.test(e.getValue().name())) {
        Sample then = before.get(e.getKey());
        ticks += e.getValue().ticks() - (then == null ? 0 : then.ticks());
      }
    }
    return ticks * MS_PER_TICK;
  }

  /** Every process named postgres, by pid; empty where there is no /proc. */
  private static Map<Long, Sample> postgresTicks() {
    return ticks(Path.of("/proc"), "postgres"::equals);
  }

  /** The JVM's own threads that {@link #VM_GROUPS} picks, by thread id. */
  private static Map<Long, Sample> vmTicks() {
    return ticks(
        Path.of("/proc/self/task"), n -> VM_GROUPS.values().stream().anyMatch(g -> g.test(n)));
  }

  /**
   * Every process (or thread, under /proc/self/task) in {@code dir} whose name {@code which} picks,
   * by id; empty where there is no /proc.
   */
  private static Map<Long, Sample> ticks(Path dir, Predicate<String> which) {
    Map<Long, Sample> out = new HashMap<>();
    try (DirectoryStream<Path> procs = Files.newDirectoryStream(dir, "[0-9]*")) {
      for (Path p : procs) {
        String stat;
        try {
          stat = Files.readString(p.resolve("stat"));
        } catch (IOException e) {
          continue; // exited meanwhile
        }
        int open = stat.indexOf('(');
        int close = stat.lastIndexOf(')');
        if (open < 0 || close < 0) {
          continue;
        }
        String name = stat.substring(open + 1, close);
        if (!which.test(name)) {
          continue;
        }
        String[] f = afterCommand(stat);
        out.put(
            Long.parseLong(p.getFileName().toString()),
            new Sample(name, Long.parseLong(f[UTIME]) + Long.parseLong(f[STIME])));
      }
    } catch (IOException | RuntimeException e) {
      return Map.of();
    }
    return out;
  }
}
