package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The test parser refuses what Prometheus would refuse, so that "it parses" means something. */
class PromTextTest {
  private static final String GOOD =
      """
      # HELP jobs Jobs done, by "kind"\\nsecond line
      # TYPE jobs counter
      jobs_total{kind="a\\"b",route="x"} 3.0
      jobs_total{kind="c",route="x"} 1
      # TYPE wait_seconds histogram
      wait_seconds_bucket{le="0.1"} 1
      wait_seconds_bucket{le="+Inf"} 2
      wait_seconds_count 2
      wait_seconds_sum 0.35
      # TYPE up gauge
      up NaN 1700000000000
      """;

  @Test
  void readsNamesLabelsValuesAndHelp() {
    PromText p = PromText.parse(GOOD);
    assertThat(p.value("jobs_total", "kind", "a\"b")).isEqualTo(3.0);
    assertThat(p.sum("jobs_total", "route", "x")).isEqualTo(4.0);
    assertThat(p.families().get("jobs").help()).isEqualTo("Jobs done, by \"kind\"\nsecond line");
    assertThat(p.value("up")).isNaN();
    assertThat(p.sampleNames()).contains("wait_seconds_bucket", "wait_seconds_sum", "up");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "orphan 1\n",
        "# TYPE a gauge\na{x=\"1\"} one\n",
        "# TYPE a gauge\na{x=\"1} 1\n",
        "# TYPE a gauge\na{x=\"\\t\"} 1\n",
        "# TYPE a gauge\na 1\na 2\n",
        "# TYPE a gauge\n# TYPE a gauge\n",
        "# TYPE a gauge\n# TYPE b gauge\na 1\n",
        "# TYPE a gauge\na_total 1\n",
        "# TYPE a wibble\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n",
        "# TYPE a gauge\na 1",
        "# TYPE a gauge\n0a 1\n",
      })
  void refusesWhatPrometheusWouldRefuse(String text) {
    assertThatThrownBy(() -> PromText.parse(text)).isInstanceOf(IllegalArgumentException.class);
  }
}
