package io.oneshot.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.function.ToDoubleFunction;

/** Percentiles by nearest rank over a sample. */
record Stats(int n, double p50, double p99, double max, double mean) {
  static Stats of(List<Double> sample) {
    if (sample.isEmpty()) {
      throw new IllegalStateException("no samples");
    }
    List<Double> s = new ArrayList<>(sample);
    Collections.sort(s);
    double sum = 0;
    for (double v : s) {
      sum += v;
    }
    return new Stats(s.size(), rank(s, 0.50), rank(s, 0.99), s.get(s.size() - 1), sum / s.size());
  }

  /**
   * The item with the median value (of an odd count; the upper middle of an even one): the run that
   * stands for several of one side.
   */
  static <T> T median(List<T> items, ToDoubleFunction<T> value) {
    List<T> sorted = new ArrayList<>(items);
    sorted.sort(Comparator.comparingDouble(value));
    return sorted.get(sorted.size() / 2);
  }

  static double rank(List<Double> sorted, double q) {
    int i = (int) Math.ceil(q * sorted.size()) - 1;
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, i)));
  }
}
