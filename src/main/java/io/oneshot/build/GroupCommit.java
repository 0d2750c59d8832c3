package io.oneshot.build;

import io.vertx.core.AsyncResult;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one kind of runner call by group commit. A call that finds fewer than {@code maxInFlight}
 * statements under way is written at once (on an event loop: at the end of its turn, with the calls
 * that turn read too); calls that arrive while every slot is busy wait for the first to free and go
 * together, as one statement and one commit. At low load nothing waits; when many runners call at
 * once, a burst of calls costs a few transactions instead of one each.
 *
 * <p>Two calls with the same key (the same build token) never share a statement: each must see the
 * other's outcome, as it would one at a time. A statement for many that fails is not an answer for
 * any of them: nothing of it committed, so each of its calls is written again alone, and gets its
 * own answer or its own error (a transition the table refuses, a deadlock with another writer).
 *
 * @param <Q> a call
 * @param <R> its answer
 */
final class GroupCommit<Q, R> {
  private static final Logger log = LoggerFactory.getLogger(GroupCommit.class);

  private record Waiting<Q, R>(Q call, Object key, Promise<R> answer, Context context) {}

  private final int maxBatch;
  private final int maxInFlight;
  private final Function<Q, Object> key;
  private final Function<List<Q>, Future<List<R>>> statement;
  private final ArrayDeque<Waiting<Q, R>> queue = new ArrayDeque<>();
  private int inFlight;
  private long statements;

  /**
   * A write is due at the end of an event loop's turn: a call made on an event loop is written once
   * the loop has handled everything it read in that turn (Netty runs such tasks after the turn's
   * I/O), so that the calls read from other connections in the same turn go with it instead of
   * waiting for its statement to end. In the drain this halved the calls written alone, each of
   * which costs PostgreSQL several times a call written with others.
   */
  private boolean writeScheduled;

  /**
   * @param key calls with equal keys go in different statements
   * @param statement writes one or several calls; its answers in the calls' order
   */
  GroupCommit(
      int maxBatch,
      int maxInFlight,
      Function<Q, Object> key,
      Function<List<Q>, Future<List<R>>> statement) {
    if (maxBatch < 1 || maxInFlight < 1) {
      throw new IllegalArgumentException("maxBatch and maxInFlight must be at least 1");
    }
    this.maxBatch = maxBatch;
    this.maxInFlight = maxInFlight;
    this.key = key;
    this.statement = statement;
  }

  /** Writes {@code call}; its answer completes on the caller's Vert.x context, when it has one. */
  Future<R> submit(Q call) {
    Promise<R> answer = Promise.promise();
    Context context = Vertx.currentContext();
    boolean onEventLoop = context != null && context.isEventLoopContext();
    boolean schedule = false;
    synchronized (this) {
      queue.add(new Waiting<>(call, key.apply(call), answer, context));
      if (onEventLoop && !writeScheduled) {
        writeScheduled = schedule = true;
      }
    }
    if (schedule) {
      context.runOnContext(
          v -> {
            synchronized (this) {
              writeScheduled = false;
            }
            writeNext();
          });
    } else if (!onEventLoop) {
      writeNext();
    }
    return answer.future();
  }

  /** Calls waiting for a slot (for tests). */
  synchronized int waiting() {
    return queue.size();
  }

  /** Statements written so far, each for one call or several (for tests). */
  synchronized long statements() {
    return statements;
  }

  private void writeNext() {
    List<Waiting<Q, R>> batch;
    synchronized (this) {
      if (inFlight >= maxInFlight || queue.isEmpty()) {
        return;
      }
      inFlight++;
      statements++;
      batch = take();
    }
    List<Q> calls = new ArrayList<>(batch.size());
    batch.forEach(w -> calls.add(w.call()));
    run(calls)
        .onComplete(
            ar -> {
              synchronized (this) {
                inFlight--;
              }
              if (ar.succeeded()) {
                for (int i = 0; i < batch.size(); i++) {
                  answer(batch.get(i), Future.succeededFuture(ar.result().get(i)));
                }
              } else if (batch.size() == 1) {
                answer(batch.getFirst(), Future.failedFuture(ar.cause()));
              } else {
                // Nothing of it committed: each call alone, for its own answer.
                log.debug(
                    "{} calls written together failed ({}); writing each alone.",
                    batch.size(),
                    ar.cause().getMessage());
                for (Waiting<Q, R> w : batch) {
                  run(List.of(w.call())).map(List::getFirst).onComplete(one -> answer(w, one));
                }
              }
              writeNext();
            });
    // Slots left: the rest of the queue need not wait for this statement.
    writeNext();
  }

  /** The next statement's calls: the oldest first, at most one per key. */
  private List<Waiting<Q, R>> take() {
    List<Waiting<Q, R>> batch = new ArrayList<>(Math.min(queue.size(), maxBatch));
    Set<Object> keys = new HashSet<>();
    Iterator<Waiting<Q, R>> it = queue.iterator();
    while (it.hasNext() && batch.size() < maxBatch) {
      Waiting<Q, R> w = it.next();
      if (keys.add(w.key())) {
        batch.add(w);
        it.remove();
      }
    }
    return batch;
  }

  /**
   * The statement for {@code calls}; one that throws instead of failing its future ends the same
   * way, and so does one that answers a different number of calls.
   */
  private Future<List<R>> run(List<Q> calls) {
    try {
      return statement
          .apply(calls)
          .compose(
              answers ->
                  answers.size() == calls.size()
                      ? Future.succeededFuture(answers)
                      : Future.failedFuture(
                          new IllegalStateException(
                              answers.size() + " answers to " + calls.size() + " calls")));
    } catch (RuntimeException e) {
      return Future.failedFuture(e);
    }
  }

  private void answer(Waiting<Q, R> w, AsyncResult<R> outcome) {
    Context here = Vertx.currentContext();
    if (w.context() == null || w.context() == here) {
      w.answer().handle(outcome);
    } else {
      w.context().runOnContext(v -> w.answer().handle(outcome));
    }
  }
}
