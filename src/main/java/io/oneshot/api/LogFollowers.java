package io.oneshot.api;

import io.vertx.core.Context;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Wakes requests that follow a build's log when the {@code oneshot_logs} notification for that
 * build arrives (new lines, or the build ended). Each registration fires once, on the context of
 * the request that registered it.
 */
public final class LogFollowers {
  private record Waiter(Context context, Runnable action) {}

  private final Map<Long, List<Waiter>> waiters = new ConcurrentHashMap<>();

  /** Runs {@code action} on {@code context} at the next notification for {@code buildId}. */
  public void once(long buildId, Context context, Runnable action) {
    waiters.compute(
        buildId,
        (k, list) -> {
          List<Waiter> l = list == null ? new ArrayList<>() : list;
          l.add(new Waiter(context, action));
          return l;
        });
  }

  /** The payload of an {@code oneshot_logs} notification: a build id. */
  public void notified(String payload) {
    long id;
    try {
      id = Long.parseLong(payload);
    } catch (NumberFormatException e) {
      return;
    }
    fire(waiters.remove(id));
  }

  /** Wakes every follower, after the listener (re)connected and may have missed notifications. */
  public void wakeAll() {
    for (Long id : List.copyOf(waiters.keySet())) {
      fire(waiters.remove(id));
    }
  }

  private static void fire(List<Waiter> list) {
    if (list != null) {
      for (Waiter w : list) {
        w.context().runOnContext(v -> w.action().run());
      }
    }
  }
}
