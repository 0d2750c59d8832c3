package io.oneshot.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

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

  static double rank(List<Double> sorted, double q) {
    int i = (int) Math.ceil(q * sorted.size()) - 1;
    return sorted.get(Math.max(0, Math.min(sorted.size() - 1, i)));
  }
}
