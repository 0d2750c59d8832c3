package io.oneshot.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.PriorityQueue;
import org.junit.jupiter.api.Test;

class ApiSeatsTest {
  private static final long MS = 1_000_000;

  @Test
  void requestsBeyondTheSeatsWaitTheirTurnAndBeyondTheQueueAreTurnedAway() {
    ApiSeats seats = new ApiSeats(2, Duration.ofMillis(10), 2);
    assertEquals(10 * MS, seats.admit(0));
    assertEquals(10 * MS, seats.admit(0));
    assertEquals(20 * MS, seats.admit(MS), "the third waits for the first seat to be free");
    assertEquals(20 * MS, seats.admit(2 * MS));
    assertEquals(-1, seats.admit(3 * MS), "two already wait: the queue is full");
    assertEquals(30 * MS, seats.admit(10 * MS), "those two have seats now, so this one waits");
    assertEquals(5, seats.served());
    assertEquals(1, seats.turnedAway());
  }

  @Test
  void aServerLeftIdleAnswersAfterTheServiceTimeAlone() {
    ApiSeats seats = new ApiSeats(1, Duration.ofMillis(10), 0);
    assertEquals(10 * MS, seats.admit(0));
    assertEquals(-1, seats.admit(5 * MS), "no queue: a busy seat turns the next away");
    assertEquals(110 * MS, seats.admit(100 * MS));
    assertEquals(2, seats.served());
  }

  @Test
  void aTurnedAwayRequestLeavesTheSeatsAsTheyWere() {
    ApiSeats seats = new ApiSeats(1, Duration.ofMillis(10), 1);
    seats.admit(0);
    seats.admit(0);
    assertEquals(-1, seats.admit(0));
    assertEquals(-1, seats.admit(0));
    assertEquals(30 * MS, seats.admit(10 * MS), "the queued one started at 10: next is at 20");
  }

  @Test
  void theMeasuredServerGivesThePlainClientTheRatesMeasuredOnTheRealOne() {
    // Before this work began, a plain fabric8 client making a launch's three requests one after
    // the other did 92 to 97 launches a second with 64 in flight against a real API server, and
    // 165 with 300 (the issue "A build's whole life at database speed").
    assertEquals(94.0, launchesPerSecond(ApiSeats.measuredServer(), 64, 3), 3.0);
    assertEquals(167.0, launchesPerSecond(ApiSeats.measuredServer(), 300, 3), 3.0);
    assertEquals(250.0, launchesPerSecond(ApiSeats.measuredServer(), 300, 2), 3.0);
    assertEquals(500.0, ApiSeats.measuredServer().ceilingPerSecond(), 1e-9);
  }

  @Test
  void aBusyLevelTurnsAwayMostOfAWaveOf64() {
    ApiSeats busy = ApiSeats.busyLevel();
    int answered = 0;
    for (int i = 0; i < 64; i++) {
      if (busy.admit(0) >= 0) {
        answered++;
      }
    }
    assertEquals(8 + 16, answered, "its seats and its queue");
    assertEquals(40, busy.turnedAway());
  }

  @Test
  void nonsenseShapesAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new ApiSeats(0, Duration.ofMillis(1), 1));
    assertThrows(IllegalArgumentException.class, () -> new ApiSeats(1, Duration.ofMillis(-1), 1));
    assertThrows(IllegalArgumentException.class, () -> new ApiSeats(1, Duration.ofMillis(1), -1));
  }

  /**
   * {@code clients} callers, each sending its next request when the last is answered (a turned away
   * one again at once), for 20 simulated seconds: launches of {@code requests} each a second.
   */
  private static double launchesPerSecond(ApiSeats seats, int clients, int requests) {
    long end = 20_000 * MS;
    PriorityQueue<Long> next = new PriorityQueue<>();
    for (int c = 0; c < clients; c++) {
      next.add(0L);
    }
    long answered = 0;
    while (next.peek() < end) {
      long now = next.poll();
      long due = seats.admit(now);
      if (due < 0) {
        next.add(now + MS);
        continue;
      }
      if (due <= end) {
        answered++;
      }
      next.add(due);
    }
    return answered / (double) requests / 20.0;
  }
}
