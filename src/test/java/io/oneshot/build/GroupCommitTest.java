package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Group commit's queueing, with statements the test answers by hand: calls that arrive while every
 * statement slot is busy go together in one statement, each with its own answer; two calls with the
 * same key never share one. {@link RunnerGroupCommitTest} has the runners' statements themselves.
 */
class GroupCommitTest {

  private record Call(String key, String value) {}

  private final List<Call> alone = new ArrayList<>();
  private final List<Promise<String>> aloneAnswers = new ArrayList<>();
  private final List<List<Call>> together = new ArrayList<>();
  private final List<Promise<List<String>>> togetherAnswers = new ArrayList<>();

  private final GroupCommit<Call, String> commit =
      new GroupCommit<>(
          3,
          2,
          Call::key,
          c -> {
            alone.add(c);
            Promise<String> p = Promise.promise();
            aloneAnswers.add(p);
            return p.future();
          },
          cs -> {
            together.add(List.copyOf(cs));
            Promise<List<String>> p = Promise.promise();
            togetherAnswers.add(p);
            return p.future();
          });

  private Future<String> submit(String key, String value) {
    return commit.submit(new Call(key, value));
  }

  @Test
  void aCallThatFindsASlotFreeIsWrittenAloneAtOnce() {
    Future<String> a = submit("a", "1");
    Future<String> b = submit("b", "2");

    assertThat(alone).extracting(Call::value).containsExactly("1", "2");
    assertThat(together).isEmpty();
    assertThat(commit.waiting()).isZero();
    aloneAnswers.get(1).complete("two");
    aloneAnswers.get(0).complete("one");
    assertThat(a.result()).isEqualTo("one");
    assertThat(b.result()).isEqualTo("two");
  }

  @Test
  void callsThatArriveWhileEverySlotIsBusyGoTogetherInArrivalOrder() {
    submit("a", "1");
    submit("b", "2");
    List<Future<String>> queued = new ArrayList<>();
    for (String k : List.of("c", "d", "e", "f")) {
      queued.add(submit(k, k.toUpperCase()));
    }
    assertThat(commit.waiting()).isEqualTo(4);

    aloneAnswers.get(0).complete("one");

    // One slot freed: the oldest three (maxBatch) in one statement, the fourth waits.
    assertThat(together).hasSize(1);
    assertThat(together.get(0)).extracting(Call::value).containsExactly("C", "D", "E");
    assertThat(commit.waiting()).isEqualTo(1);
    togetherAnswers.get(0).complete(List.of("c!", "d!", "e!"));
    assertThat(queued.subList(0, 3)).extracting(Future::result).containsExactly("c!", "d!", "e!");
    // The fourth took the slot that statement freed, alone.
    assertThat(alone).extracting(Call::value).containsExactly("1", "2", "F");
    assertThat(commit.statements()).isEqualTo(4);
  }

  @Test
  void twoCallsWithOneKeyNeverShareAStatement() {
    submit("busy1", "0");
    submit("busy2", "0");
    Future<String> first = submit("t", "first");
    Future<String> second = submit("t", "second");
    Future<String> other = submit("u", "other");

    aloneAnswers.get(0).complete("x");

    assertThat(together).hasSize(1);
    assertThat(together.get(0)).extracting(Call::value).containsExactly("first", "other");
    assertThat(commit.waiting()).isEqualTo(1);
    togetherAnswers.get(0).complete(List.of("1st", "3rd"));
    assertThat(alone).extracting(Call::value).containsExactly("0", "0", "second");
    aloneAnswers.get(2).complete("2nd");
    assertThat(List.of(first, second, other))
        .extracting(Future::result)
        .containsExactly("1st", "2nd", "3rd");
  }

  @Test
  void aStatementForSeveralThatFailsIsWrittenAgainCallByCallEachWithItsOwnAnswer() {
    submit("busy1", "0");
    submit("busy2", "0");
    Future<String> a = submit("a", "A");
    Future<String> b = submit("b", "B");
    aloneAnswers.get(0).complete("x");

    togetherAnswers.get(0).fail(new IllegalStateException("deadlock detected"));

    assertThat(alone).extracting(Call::value).containsExactly("0", "0", "A", "B");
    aloneAnswers.get(2).complete("a alone");
    aloneAnswers.get(3).fail(new IllegalStateException("transition refused"));
    assertThat(a.result()).isEqualTo("a alone");
    assertThat(b.failed()).isTrue();
    assertThat(b.cause()).hasMessage("transition refused");
  }

  @Test
  void aStatementThatThrowsFailsItsCallAndFreesItsSlot() {
    GroupCommit<Call, String> throwing =
        new GroupCommit<>(
            3,
            1,
            Call::key,
            c -> {
              if (c.value().equals("bad")) {
                throw new IllegalArgumentException("cannot encode");
              }
              return Future.succeededFuture(c.value() + "!");
            },
            cs -> Future.failedFuture("not expected"));

    Future<String> bad = throwing.submit(new Call("a", "bad"));
    Future<String> good = throwing.submit(new Call("b", "good"));

    assertThat(bad.cause()).hasMessage("cannot encode");
    assertThat(good.result()).isEqualTo("good!");
  }

  @Test
  void sizesBelowOneAreRefused() {
    assertThatThrownBy(() -> new GroupCommit<Call, String>(0, 1, Call::key, c -> null, cs -> null))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
