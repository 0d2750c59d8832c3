package io.oneshot.launch.kubernetes;

import io.oneshot.launch.Reachability;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the API server answered the latest call or watch event. Any HTTP answer counts, a refusal
 * included: only a call that got no answer (refused or dropped connection, timeout) makes it
 * unreachable. When it answers again, the listeners are told at once, on the caller's thread.
 */
final class ApiReachability {
  private static final Logger log = LoggerFactory.getLogger(ApiReachability.class);

  private final String url;
  private final List<Runnable> listeners = new CopyOnWriteArrayList<>();
  private volatile Reachability state;

  ApiReachability(String url) {
    this.url = url;
    this.state = new Reachability(true, "", Instant.now());
  }

  Reachability state() {
    return state;
  }

  void whenReachable(Runnable listener) {
    listeners.add(listener);
  }

  /** The API server answered (with anything, a refusal included). */
  void answered() {
    Reachability was = state;
    if (was.reachable()) {
      return;
    }
    synchronized (this) {
      if (state.reachable()) {
        return;
      }
      state = new Reachability(true, "", Instant.now());
    }
    log.info(
        "The Kubernetes API at {} answers again (it could not be reached: {}).", url, was.detail());
    for (Runnable l : listeners) {
      try {
        l.run();
      } catch (RuntimeException e) {
        log.warn("A listener failed on the Kubernetes API's return: {}.", e.toString());
      }
    }
  }

  /** A call got no answer; {@code why} is the client's own message (connection refused, …). */
  synchronized void unanswered(String why) {
    String detail = describe(why);
    Reachability was = state;
    if (!was.reachable() && was.detail().equals(detail)) {
      return;
    }
    state = new Reachability(false, detail, was.reachable() ? Instant.now() : was.since());
  }

  /** "the Kubernetes API at https://… refuses …". */
  String describeRefusal(String what) {
    return "the Kubernetes API at " + url + " " + what;
  }

  /** "cannot reach the Kubernetes API at https://…: connection refused". */
  String describe(String why) {
    return "cannot reach the Kubernetes API at " + url + ": " + why;
  }
}
