package io.oneshot.bench;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.PriorityQueue;

/**
 * When a busy API server answers a request: it serves {@code seats} requests at once, each for
 * {@code service}, and the others wait their turn in arrival order, at most {@code queueLimit} of
 * them; one more is turned away at once (429), as API Priority and Fairness turns away a flow whose
 * queues are full. Watches take no seat (a real server serves their events from its watch cache).
 *
 * <p>It answers only when, on the caller's clock, so that it can be checked without waiting: the
 * server it paces ({@link EchoApi}) delays each answer until then.
 */
final class ApiSeats {
  /**
   * A server shaped after the one measured before this work began (a real kube-apiserver with a
   * real etcd): a plain fabric8 client making three requests a launch did 92 to 97 launches a
   * second with 64 in flight and 165 with 300. 115 seats of 230 ms give both: 64 requests at once
   * are all served, 64 / 0.23 s = 278 requests a second (93 launches); 300 fill the seats, 115 /
   * 0.23 s = 500 a second (167 launches). The queue limit is one flow's in the default priority
   * level of a ServiceAccount ({@code workload-low}: a hand of 6 queues of 50).
   */
  static ApiSeats measuredServer() {
    return new ApiSeats(115, Duration.ofMillis(230), 300);
  }

  /**
   * The same server where the dispatcher's flow has a small share of its priority level: 8 seats of
   * 230 ms and 16 places in its queues, so that most of a wave of 64 launches is turned away.
   */
  static ApiSeats busyLevel() {
    return new ApiSeats(8, Duration.ofMillis(230), 16);
  }

  private final int seats;
  private final long serviceNanos;
  private final int queueLimit;

  /** When each busy seat is free again. */
  private final PriorityQueue<Long> busyUntil = new PriorityQueue<>();

  /** When each request still waiting for a seat gets one, earliest first. */
  private final ArrayDeque<Long> waiting = new ArrayDeque<>();

  private long served;
  private long turnedAway;

  ApiSeats(int seats, Duration service, int queueLimit) {
    if (seats < 1 || service.isNegative() || queueLimit < 0) {
      throw new IllegalArgumentException(
          "seats " + seats + ", service " + service + ", queue limit " + queueLimit);
    }
    this.seats = seats;
    this.serviceNanos = service.toNanos();
    this.queueLimit = queueLimit;
  }

  /**
   * A request arriving at {@code now} (nanoseconds on any clock that never goes back): when it is
   * answered, on that clock, or -1 when it is turned away.
   */
  synchronized long admit(long now) {
    while (!waiting.isEmpty() && waiting.peekFirst() <= now) {
      waiting.pollFirst();
    }
    while (!busyUntil.isEmpty() && busyUntil.peek() <= now) {
      busyUntil.poll();
    }
    long start = busyUntil.size() < seats ? now : busyUntil.poll();
    if (start > now) {
      if (waiting.size() >= queueLimit) {
        busyUntil.add(start); // the seat taken to look at is given back
        turnedAway++;
        return -1;
      }
      waiting.addLast(start);
    }
    busyUntil.add(start + serviceNanos);
    served++;
    return start + serviceNanos;
  }

  /** Requests given a seat so far. */
  synchronized long served() {
    return served;
  }

  /** Requests turned away so far (each answered 429). */
  synchronized long turnedAway() {
    return turnedAway;
  }

  /** Requests a second it serves at most. */
  double ceilingPerSecond() {
    return seats * 1e9 / serviceNanos;
  }

  /** Its shape, for a report: "115 seats of 230 ms". */
  String describe() {
    return seats + " seats of " + serviceNanos / 1_000_000 + " ms";
  }

  /** Requests that may wait for a seat at once. */
  int queueLimit() {
    return queueLimit;
  }
}
