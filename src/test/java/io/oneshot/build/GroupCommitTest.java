package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Group commit's queueing, with statements the test answers by hand: calls that arrive while every
 * statement slot is busy go together in one statement, each with its own answer; two calls with the
 * same key never share one. {@link RunnerGroupCommitTest} has the runners' statements themselves.
 */
class GroupCommitTest {
  private record Call(String key, String value) {}

  /** Each statement written: its calls, and the answer the test gives it. */
  private record Written(List<Call> calls, Promise<List<String>> answer) {
    List<String> values() {
      return calls.stream().map(Call::value).toList();
    }

    /** Answers each call with its value and a mark. */
    void answerEach(String mark) {
      answer.complete(calls.stream().map(c -> c.value() + mark).toList());
    }
  }

  private final List<Written> written = new ArrayList<>();

  private final GroupCommit<Call, String> commit =
      new GroupCommit<>(
          3,
          2,
          Call::key,
          cs -> {
            Promise<List<String>> p = Promise.promise();
            written.add(new Written(List.copyOf(cs), p));
            return p.future();
          });

  private Future<String> submit(String key, String value) {
    return commit.submit(new Call(key, value));
  }

  @Test
  void aCallThatFindsASlotFreeIsWrittenAloneAtOnce() {
    Future<String> a = submit("a", "1");
    Future<String> b = submit("b", "2");

    assertThat(written).extracting(Written::values).containsExactly(List.of("1"), List.of("2"));
    assertThat(commit.waiting()).isZero();
    written.get(1).answerEach("!");
    written.get(0).answerEach("?");
    assertThat(a.result()).isEqualTo("1?");
    assertThat(b.result()).isEqualTo("2!");
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

    written.get(0).answerEach("");

    // One slot freed: the oldest three (maxBatch) in one statement, the fourth waits.
    assertThat(written).hasSize(3);
    assertThat(written.get(2).values()).containsExactly("C", "D", "E");
    assertThat(commit.waiting()).isEqualTo(1);
    written.get(2).answer().complete(List.of("c!", "d!", "e!"));
    assertThat(queued.subList(0, 3)).extracting(Future::result).containsExactly("c!", "d!", "e!");
    // The fourth took the slot that statement freed, alone.
    assertThat(written.get(3).values()).containsExactly("F");
    assertThat(commit.statements()).isEqualTo(4);
  }

  @Test
  void twoCallsWithOneKeyNeverShareAStatement() {
    submit("busy1", "0");
    submit("busy2", "0");
    Future<String> first = submit("t", "first");
    Future<String> second = submit("t", "second");
    Future<String> other = submit("u", "other");

    written.get(0).answerEach("");

    assertThat(written.get(2).values()).containsExactly("first", "other");
    assertThat(commit.waiting()).isEqualTo(1);
    written.get(2).answerEach("!");
    assertThat(written.get(3).values()).containsExactly("second");
    written.get(3).answerEach("!");
    assertThat(List.of(first, second, other))
        .extracting(Future::result)
        .containsExactly("first!", "second!", "other!");
  }

  @Test
  void aStatementForSeveralThatFailsIsWrittenAgainCallByCallEachWithItsOwnAnswer() {
    submit("busy1", "0");
    submit("busy2", "0");
    Future<String> a = submit("a", "A");
    Future<String> b = submit("b", "B");
    written.get(0).answerEach("");

    written.get(2).answer().fail(new IllegalStateException("deadlock detected"));

    assertThat(written.subList(3, 5))
        .extracting(Written::values)
        .containsExactly(List.of("A"), List.of("B"));
    written.get(3).answerEach(" alone");
    written.get(4).answer().fail(new IllegalStateException("transition refused"));
    assertThat(a.result()).isEqualTo("A alone");
    assertThat(b.failed()).isTrue();
    assertThat(b.cause()).hasMessage("transition refused");
  }

  @Test
  void aStatementThatThrowsOrMiscountsFailsItsCallsAndFreesItsSlot() {
    GroupCommit<Call, String> odd =
        new GroupCommit<>(
            3,
            1,
            Call::key,
            cs -> {
              String v = cs.getFirst().value();
              if (v.equals("bad")) {
                throw new IllegalArgumentException("cannot encode");
              }
              return Future.succeededFuture(v.equals("short") ? List.of() : List.of(v + "!"));
            });

    Future<String> bad = odd.submit(new Call("a", "bad"));
    Future<String> shortAnswer = odd.submit(new Call("b", "short"));
    Future<String> good = odd.submit(new Call("c", "good"));

    assertThat(bad.cause()).hasMessage("cannot encode");
    assertThat(shortAnswer.cause()).hasMessage("0 answers to 1 calls");
    assertThat(good.result()).isEqualTo("good!");
  }

  @Test
  void sizesBelowOneAreRefused() {
    assertThatThrownBy(() -> new GroupCommit<Call, String>(0, 1, Call::key, cs -> null))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void callsMadeInOneTurnOfAnEventLoopGoTogetherAtItsEnd() throws Exception {
    Vertx vertx = Vertx.vertx();
    try {
      Context loop = vertx.getOrCreateContext();
      CompletableFuture<List<List<String>>> seen = new CompletableFuture<>();
      loop.runOnContext(
          v -> {
            submit("a", "1");
            submit("b", "2");
            submit("c", "3");
            // Nothing is written while the turn lasts...
            assertThat(written).isEmpty();
            // ...and all three at its end, in one statement, though two slots were free.
            loop.runOnContext(w -> seen.complete(written.stream().map(Written::values).toList()));
          });
      assertThat(seen.get(10, TimeUnit.SECONDS)).containsExactly(List.of("1", "2", "3"));

      // A call alone on the loop is written at its turn's end too, not left waiting for company.
      CompletableFuture<List<List<String>>> alone = new CompletableFuture<>();
      loop.runOnContext(
          v -> {
            written.getFirst().answerEach("");
            submit("d", "4");
            loop.runOnContext(w -> alone.complete(written.stream().map(Written::values).toList()));
          });
      assertThat(alone.get(10, TimeUnit.SECONDS)).last().isEqualTo(List.of("4"));
    } finally {
      vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
  }
}
