package io.oneshot.bench;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The figures of one benchmark run: printed as a markdown table, written as JSON. */
final class Report {
  /**
   * One figure. {@code goal} is the target as text ("< 5"), null where there is none;
   * {@code met} whether this run reached it (null: no goal, or a smoke run, whose figures mean
   * nothing). A {@code reference} is what oneshot's figures are read against, measured in the same
   * run on the same machine: a peer doing the same work (db-scheduler, a plain fabric8 client), or
   * a ceiling (the bare statements, a bare JVM, the same server idle).
   */
  record Figure(
      String scenario,
      String variant,
      String metric,
      double value,
      String unit,
      Goal goal,
      boolean reference) {
    Figure(String scenario, String variant, String metric, double value, String unit, Goal goal) {
      this(scenario, variant, metric, value, unit, goal, false);
    }

    Boolean met(boolean smoke) {
      return goal == null || smoke ? null : goal.test(value);
    }

    Figure asReference() {
      return reference ? this : new Figure(scenario, variant, metric, value, unit, goal, true);
    }
  }

  /** A target: below (or above) a bound. */
  record Goal(boolean below, double bound) {
    static Goal under(double bound) {
      return new Goal(true, bound);
    }

    static Goal atLeast(double bound) {
      return new Goal(false, bound);
    }

    boolean test(double v) {
      return below ? v < bound : v >= bound;
    }

    @Override
    public String toString() {
      return (below ? "< " : "≥ ") + Report.format(bound);
    }
  }

  private final List<Figure> figures = new ArrayList<>();

  /** Cases ("scenario / case") whose figures are all references, declared by {@link #reference}. */
  private final java.util.Set<String> referenceCases = new java.util.HashSet<>();

  private final List<String> notes = new ArrayList<>();
  private final boolean smoke;
  private final Map<String, String> machine;

  private final boolean quiet;

  Report(boolean smoke, Map<String, String> machine) {
    this(smoke, machine, false);
  }

  private Report(boolean smoke, Map<String, String> machine, boolean quiet) {
    this.smoke = smoke;
    this.machine = machine;
    this.quiet = quiet;
  }

  /** A report nobody reads: for the warm-up runs before what is measured. */
  static Report scratch() {
    return new Report(false, Map.of(), true);
  }

  synchronized void add(
      String scenario, String variant, String metric, double value, String unit, Goal goal) {
    add(new Figure(scenario, variant, metric, value, unit, goal));
  }

  /**
   * Adds a figure another report took (a run measured aside, shown once it is chosen), a reference
   * there or in a case declared one here.
   */
  synchronized void add(Figure f) {
    Figure g = referenceCases.contains(f.scenario() + " / " + f.variant()) ? f.asReference() : f;
    figures.add(g);
    if (quiet) {
      return;
    }
    System.out.printf(
        Locale.ROOT,
        "  %s / %s: %s = %s %s%s%n",
        g.scenario(),
        g.variant(),
        g.metric(),
        format(g.value()),
        g.unit(),
        g.goal() != null
            ? " (goal " + g.goal() + " " + g.unit() + ")"
            : g.reference() ? " (reference)" : "");
  }

  /**
   * Declares a case a reference: every figure of it, added before or after, is a peer or a ceiling
   * of the scenario's own figures (see {@link Figure}).
   */
  synchronized void reference(String scenario, String variant) {
    referenceCases.add(scenario + " / " + variant);
    figures.replaceAll(
        f -> f.scenario().equals(scenario) && f.variant().equals(variant) ? f.asReference() : f);
  }

  /** Adds one reference figure to a case that also holds oneshot's own. */
  void addReference(String scenario, String variant, String metric, double value, String unit) {
    add(new Figure(scenario, variant, metric, value, unit, null, true));
  }

  void add(String scenario, String variant, String metric, double value, String unit) {
    add(scenario, variant, metric, value, unit, null);
  }

  /** Adds p50, p99 and max of {@code ms} as three figures, with goals for p50 and p99 if given. */
  void latency(String scenario, String variant, String what, List<Double> ms, Goal p50, Goal p99) {
    Stats s = Stats.of(ms);
    add(scenario, variant, what + " p50", s.p50(), "ms", p50);
    add(scenario, variant, what + " p99", s.p99(), "ms", p99);
    add(scenario, variant, what + " max", s.max(), "ms");
  }

  synchronized void note(String text) {
    notes.add(text);
    System.out.println("  note: " + text);
  }

  synchronized List<Figure> figures() {
    return List.copyOf(figures);
  }

  String markdown() {
    StringBuilder b = new StringBuilder();
    b.append("| scenario | case | figure | value | goal or reference |\n");
    b.append("|---|---|---|---:|---|\n");
    for (Figure f : figures) {
      Boolean met = f.met(smoke);
      b.append("| ")
          .append(f.scenario())
          .append(" | ")
          .append(f.variant())
          .append(" | ")
          .append(f.metric())
          .append(" | ")
          .append(format(f.value()))
          .append(' ')
          .append(f.unit())
          .append(" | ")
          .append(
              f.goal() != null
                  ? f.goal() + " " + f.unit() + (met == null ? "" : met ? " ✓" : " ✗ (missed)")
                  : f.reference() ? "reference" : "")
          .append(" |\n");
    }
    for (String n : notes) {
      b.append("\n- ").append(n);
    }
    if (!notes.isEmpty()) {
      b.append('\n');
    }
    return b.toString();
  }

  void writeJson(Path file, Instant started, String command) {
    ObjectNode root = Json.MAPPER.createObjectNode();
    root.put("started", started.toString());
    root.put("command", command);
    root.put("smoke", smoke);
    ObjectNode m = root.putObject("machine");
    machine.forEach(m::put);
    ArrayNode rows = root.putArray("figures");
    for (Figure f : figures) {
      ObjectNode r = rows.addObject();
      r.put("scenario", f.scenario());
      r.put("case", f.variant());
      r.put("figure", f.metric());
      r.put("value", f.value());
      r.put("unit", f.unit());
      if (f.reference()) {
        r.put("reference", true);
      }
      if (f.goal() != null) {
        r.put("goal", f.goal().toString() + " " + f.unit());
        Boolean met = f.met(smoke);
        if (met != null) {
          r.put("met", met);
        }
      }
    }
    ArrayNode ns = root.putArray("notes");
    notes.forEach(ns::add);
    try {
      Files.createDirectories(file.toAbsolutePath().getParent());
      Json.MAPPER.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String format(double v) {
    if (v == Math.rint(v) && Math.abs(v) < 1e15) {
      return String.format(Locale.ROOT, "%,d", (long) v);
    }
    if (Math.abs(v) >= 100) {
      return String.format(Locale.ROOT, "%,.0f", v);
    }
    if (Math.abs(v) >= 10) {
      return String.format(Locale.ROOT, "%.1f", v);
    }
    return String.format(Locale.ROOT, "%.2f", v);
  }
}
