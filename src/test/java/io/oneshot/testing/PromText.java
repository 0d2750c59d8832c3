package io.oneshot.testing;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for checking what
 * {@code /metrics} serves and reading values from it. It refuses what Prometheus would refuse or
 * misread: a malformed line, a sample before its family's TYPE or away from its family, a TYPE or
 * HELP given twice, a series given twice, a name that does not fit its family's type, and a
 * histogram whose buckets are not cumulative or whose {@code +Inf} bucket differs from its count.
 */
public final class PromText {
  /** One sample line: its full name (with any suffix), its labels and its value. */
  public record Sample(String name, Map<String, String> labels, double value) {}

  /** One metric family: the name of its TYPE line, its type, help and samples. */
  public record Family(String name, String type, String help, List<Sample> samples) {}

  private static final Pattern NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
  private static final Pattern LABEL_NAME = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");
  private static final Set<String> TYPES =
      Set.of("counter", "gauge", "histogram", "summary", "untyped");

  private final Map<String, Family> families = new LinkedHashMap<>();

  private PromText() {}

  /** Parses an exposition; throws {@link IllegalArgumentException} naming the offending line. */
  public static PromText parse(String text) {
    PromText p = new PromText();
    p.read(text);
    p.checkHistograms();
    return p;
  }

  public Map<String, Family> families() {
    return families;
  }

  /** The value of the one series of this name whose labels include these, or null if none. */
  public Double value(String name, String... labelPairs) {
    List<Sample> found = samples(name, labelPairs);
    if (found.size() > 1) {
      throw new IllegalArgumentException(name + " " + List.of(labelPairs) + " matches " + found);
    }
    return found.isEmpty() ? null : found.get(0).value();
  }

  /** The sum over every series of this name whose labels include these (0 if none). */
  public double sum(String name, String... labelPairs) {
    return samples(name, labelPairs).stream().mapToDouble(Sample::value).sum();
  }

  /** Every sample of this full name whose labels include the given pairs. */
  public List<Sample> samples(String name, String... labelPairs) {
    Map<String, String> want = new TreeMap<>();
    for (int i = 0; i < labelPairs.length; i += 2) {
      want.put(labelPairs[i], labelPairs[i + 1]);
    }
    List<Sample> out = new ArrayList<>();
    for (Family f : families.values()) {
      for (Sample s : f.samples()) {
        if (s.name().equals(name) && s.labels().entrySet().containsAll(want.entrySet())) {
          out.add(s);
        }
      }
    }
    return out;
  }

  /** Every sample name served (with suffixes such as {@code _bucket} and {@code _total}). */
  public Set<String> sampleNames() {
    Set<String> out = new HashSet<>();
    families.values().forEach(f -> f.samples().forEach(s -> out.add(s.name())));
    return out;
  }

  private void read(String text) {
    Map<String, String> helps = new LinkedHashMap<>();
    Set<String> series = new HashSet<>();
    Set<String> closed = new HashSet<>();
    String current = null;
    String[] lines = text.split("\n", -1);
    if (!text.isEmpty() && !text.endsWith("\n")) {
      throw new IllegalArgumentException("the exposition must end with a line feed");
    }
    for (int n = 0; n < lines.length; n++) {
      String line = lines[n];
      String where = "line " + (n + 1) + " (" + line + ")";
      if (line.isBlank()) {
        continue;
      }
      if (line.startsWith("#")) {
        String[] parts = line.split(" ", 4);
        if (parts.length >= 3 && parts[1].equals("HELP")) {
          check(NAME.matcher(parts[2]).matches(), where, "bad metric name");
          check(!helps.containsKey(parts[2]), where, "HELP given twice");
          helps.put(parts[2], parts.length == 4 ? unescapeHelp(parts[3], where) : "");
        } else if (parts.length >= 3 && parts[1].equals("TYPE")) {
          check(parts.length == 4 && TYPES.contains(parts[3]), where, "bad TYPE line");
          check(NAME.matcher(parts[2]).matches(), where, "bad metric name");
          check(!families.containsKey(parts[2]), where, "TYPE given twice");
          check(!closed.contains(parts[2]), where, "TYPE after the family's samples");
          if (current != null) {
            closed.add(current);
          }
          current = parts[2];
          families.put(current, new Family(current, parts[3], null, new ArrayList<>()));
        }
        continue;
      }
      Sample s = sample(line, where);
      String family = familyOf(s.name());
      check(family != null, where, "a sample with no TYPE before it");
      check(family.equals(current), where, "a sample away from the rest of its family");
      Family f = families.get(family);
      check(fits(f, s), where, "the name does not fit a " + f.type());
      check(series.add(s.name() + new TreeMap<>(s.labels())), where, "a series given twice");
      f.samples().add(s);
    }
    for (Map.Entry<String, Family> e : families.entrySet()) {
      Family f = e.getValue();
      e.setValue(new Family(f.name(), f.type(), helps.get(f.name()), f.samples()));
    }
  }

  private String familyOf(String sample) {
    if (families.containsKey(sample)) {
      return sample;
    }
    for (String suffix : List.of("_total", "_created", "_bucket", "_sum", "_count")) {
      if (sample.endsWith(suffix)) {
        String base = sample.substring(0, sample.length() - suffix.length());
        if (families.containsKey(base)) {
          return base;
        }
      }
    }
    return null;
  }

  private static boolean fits(Family f, Sample s) {
    String suffix = s.name().substring(f.name().length());
    return switch (f.type()) {
      case "counter" -> suffix.equals("_total") || suffix.equals("_created") || suffix.isEmpty();
      case "gauge", "untyped" -> suffix.isEmpty();
      case "histogram" ->
          (suffix.equals("_bucket") && s.labels().containsKey("le"))
              || ((suffix.equals("_sum") || suffix.equals("_count") || suffix.equals("_created"))
                  && !s.labels().containsKey("le"));
      case "summary" ->
          suffix.isEmpty() && s.labels().containsKey("quantile")
              || suffix.equals("_sum")
              || suffix.equals("_count")
              || suffix.equals("_created");
      default -> false;
    };
  }

  private static Sample sample(String line, String where) {
    Matcher m = NAME.matcher(line);
    check(m.lookingAt(), where, "no metric name");
    String name = m.group();
    int i = m.end();
    Map<String, String> labels = new LinkedHashMap<>();
    if (i < line.length() && line.charAt(i) == '{') {
      i++;
      while (line.charAt(i) != '}') {
        Matcher l = LABEL_NAME.matcher(line).region(i, line.length());
        check(l.lookingAt(), where, "bad label name");
        String label = l.group();
        i = l.end();
        check(line.startsWith("=\"", i), where, "expected =\" after " + label);
        i += 2;
        StringBuilder v = new StringBuilder();
        while (true) {
          check(i < line.length(), where, "unterminated label value");
          char c = line.charAt(i++);
          if (c == '"') {
            break;
          }
          if (c == '\\') {
            check(i < line.length(), where, "dangling escape");
            char e = line.charAt(i++);
            switch (e) {
              case '\\' -> v.append('\\');
              case '"' -> v.append('"');
              case 'n' -> v.append('\n');
              default -> throw new IllegalArgumentException(where + ": bad escape \\" + e);
            }
          } else {
            v.append(c);
          }
        }
        check(labels.put(label, v.toString()) == null, where, "label " + label + " twice");
        check(i < line.length(), where, "unterminated labels");
        if (line.charAt(i) == ',') {
          i++;
        } else {
          check(line.charAt(i) == '}', where, "expected , or }");
        }
      }
      i++;
    }
    check(i < line.length() && line.charAt(i) == ' ', where, "expected a space before the value");
    String[] rest = line.substring(i + 1).split(" ");
    check(rest.length == 1 || rest.length == 2, where, "expected a value and maybe a timestamp");
    double value = number(rest[0], where);
    if (rest.length == 2) {
      check(rest[1].matches("-?[0-9]+"), where, "bad timestamp");
    }
    return new Sample(name, labels, value);
  }

  private static double number(String s, String where) {
    return switch (s) {
      case "+Inf", "Inf" -> Double.POSITIVE_INFINITY;
      case "-Inf" -> Double.NEGATIVE_INFINITY;
      case "NaN" -> Double.NaN;
      default -> {
        check(s.matches("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?"), where, "bad value");
        yield Double.parseDouble(s);
      }
    };
  }

  private static String unescapeHelp(String s, String where) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\') {
        check(i + 1 < s.length(), where, "dangling escape in HELP");
        char e = s.charAt(++i);
        check(e == '\\' || e == 'n', where, "bad escape in HELP");
        out.append(e == 'n' ? '\n' : '\\');
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  /** Buckets cumulative and ending in +Inf, which equals the count, for every histogram series. */
  private void checkHistograms() {
    for (Family f : families.values()) {
      if (!f.type().equals("histogram")) {
        continue;
      }
      Map<Map<String, String>, TreeMap<Double, Double>> buckets = new LinkedHashMap<>();
      Map<Map<String, String>, Double> counts = new LinkedHashMap<>();
      for (Sample s : f.samples()) {
        Map<String, String> series = new TreeMap<>(s.labels());
        if (s.name().endsWith("_bucket")) {
          double le = number(series.remove("le"), f.name());
          buckets.computeIfAbsent(series, k -> new TreeMap<>()).put(le, s.value());
        } else if (s.name().endsWith("_count")) {
          counts.put(series, s.value());
        }
      }
      check(buckets.keySet().equals(counts.keySet()), f.name(), "buckets and counts differ");
      buckets.forEach(
          (series, b) -> {
            double last = 0;
            for (double v : b.values()) {
              check(v >= last, f.name() + series, "buckets not cumulative");
              last = v;
            }
            check(b.lastKey() == Double.POSITIVE_INFINITY, f.name() + series, "no +Inf bucket");
            check(last == counts.get(series), f.name() + series, "+Inf bucket is not the count");
          });
    }
  }

  private static void check(boolean ok, String where, String what) {
    if (!ok) {
      throw new IllegalArgumentException(where + ": " + what);
    }
  }
}
