package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SnapshotTest {
  private final List<Promise<Integer>> loads = new ArrayList<>();

  private Future<Integer> load() {
    Promise<Integer> p = Promise.promise();
    loads.add(p);
    return p.future();
  }

  @Test
  void callersWithinTheMaxAgeShareOneQuery() {
    Snapshot<Integer> s = new Snapshot<>(this::load, Duration.ofHours(1));
    Future<Integer> first = s.get();
    Future<Integer> meanwhile = s.get();
    assertThat(loads).hasSize(1);
    loads.get(0).complete(7);
    assertThat(first.result()).isEqualTo(7);
    assertThat(meanwhile.result()).isEqualTo(7);
    assertThat(s.get().result()).isEqualTo(7);
    assertThat(loads).hasSize(1);
  }

  @Test
  void anOldAnswerIsReadAgainAndAFailureIsNotKept() {
    Snapshot<Integer> s = new Snapshot<>(this::load, Duration.ZERO);
    s.get();
    loads.get(0).fail("database down");
    Future<Integer> retry = s.get();
    assertThat(loads).hasSize(2);
    loads.get(1).complete(1);
    assertThat(retry.result()).isEqualTo(1);
    s.get();
    assertThat(loads).as("older than the max age: read again").hasSize(3);
  }

  @Test
  void aFailedReadIsNotServedWithinTheMaxAge() {
    Snapshot<Integer> s = new Snapshot<>(this::load, Duration.ofHours(1));
    s.get();
    loads.get(0).fail("database down");
    s.get();
    assertThat(loads).hasSize(2);
  }
}
