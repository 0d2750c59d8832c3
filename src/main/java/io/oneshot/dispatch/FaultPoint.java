package io.oneshot.dispatch;

import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The places in a build's life where the fault-injection tests stop a dispatcher dead, exactly as
 * SIGKILL would (no cleanup, no shutdown hook): each sits between two steps whose order matters.
 * Off unless {@code ONESHOT_FAULTS} arms some, each with the chance of dying when passing it:
 *
 * <pre>ONESHOT_FAULTS=after_claim:0.05,after_launch:0.05,before_kill:0.1</pre>
 *
 * Unarmed, {@link #reach()} is a read of one static field.
 */
public enum FaultPoint {
  /** The claim committed; the launcher has not been called. */
  AFTER_CLAIM,
  /** The launcher started the attempt (Job created, process started); it is not recorded yet. */
  AFTER_LAUNCH,
  /** A cancel committed; the API has not answered and the attempt is not killed yet. */
  AFTER_CANCEL,
  /** An attempt no live build needs (canceled, superseded) is about to be killed. */
  BEFORE_KILL,
  /** A lost attempt's build was requeued (or ended); the attempt is not killed yet. */
  DURING_REQUEUE;

  /** The environment variable that arms fault points. */
  public static final String ENV = "ONESHOT_FAULTS";

  private static final Map<FaultPoint, Double> ARMED = parse(System.getenv(ENV));

  /** Dies here, as by SIGKILL, with the chance this point is armed with. */
  public void reach() {
    if (ARMED == null) {
      return;
    }
    Double chance = ARMED.get(this);
    if (chance != null && ThreadLocalRandom.current().nextDouble() < chance) {
      System.err.println("oneshot: fault point " + name().toLowerCase(Locale.ROOT) + ": dying");
      System.err.flush();
      Runtime.getRuntime().halt(137);
    }
  }

  /** {@code name:chance,...}; null when nothing is armed. Malformed entries are refused. */
  static Map<FaultPoint, Double> parse(String spec) {
    if (spec == null || spec.isBlank()) {
      return null;
    }
    Map<FaultPoint, Double> out = new EnumMap<>(FaultPoint.class);
    for (String entry : spec.split(",")) {
      String[] kv = entry.strip().split(":", 2);
      FaultPoint p;
      try {
        p = valueOf(kv[0].strip().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(ENV + ": no fault point named " + kv[0].strip(), e);
      }
      out.put(p, kv.length == 2 ? Double.parseDouble(kv[1].strip()) : 1.0);
    }
    return out;
  }
}
