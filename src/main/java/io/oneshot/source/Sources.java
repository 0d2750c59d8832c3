package io.oneshot.source;

import io.oneshot.api.Metrics;
import io.oneshot.build.LeaderFence;
import io.oneshot.build.SourceStore;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/** The configured queue sources of one dispatcher replica, started and stopped together. */
public final class Sources implements AutoCloseable {
  private final List<QueueSource> sources = new ArrayList<>();

  public Sources(
      Vertx vertx,
      OneshotConfig config,
      SourceStore store,
      Supplier<LeaderFence> fence,
      Metrics metrics) {
    for (OneshotConfig.Source s : config.sources()) {
      sources.add(new QueueSource(vertx, s, config, store, fence, metrics));
    }
    if (!sources.isEmpty()) {
      metrics.watchSources(this::jobs, this::up);
    }
  }

  public void start() {
    sources.forEach(QueueSource::start);
  }

  /** Asks every source for one more look (a slot may have been freed, leadership gained). */
  public void wakeAll() {
    sources.forEach(QueueSource::wake);
  }

  public List<QueueSource> all() {
    return List.copyOf(sources);
  }

  /** Whether any source is Coder's (its builds' outcomes are then read from Coder's tables). */
  public boolean anyCoder() {
    return sources.stream().anyMatch(s -> s.coder());
  }

  /**
   * What Coder's tables say became of the job daemon {@code daemon} took, for a build of coder
   * source {@code source} in {@code organization}; empty when it took none. Fails when there is no
   * such coder source.
   */
  public io.vertx.core.Future<java.util.Optional<CoderOutcome>> coderOutcome(
      String source, String organization, String daemon) {
    for (QueueSource s : sources) {
      if (s.name().equals(source) && s.coder()) {
        return s.outcomeOf(daemon, organization);
      }
    }
    return io.vertx.core.Future.failedFuture(
        new IllegalStateException("no Coder source " + source + " is configured"));
  }

  public List<QueueSource.Status> statuses() {
    return sources.stream().map(QueueSource::status).toList();
  }

  /** What {@code GET /api/v1/sources} answers: each source's last look. */
  public List<Map<String, Object>> json() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (QueueSource.Status s : statuses()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("name", s.name());
      m.put("kind", s.kind());
      m.put("leading", s.leading());
      m.put("up", s.up());
      m.put("listening", s.listening());
      m.put("lastLook", s.at() == null ? null : s.at().toString());
      if (s.error() != null) {
        m.put("error", s.error());
      }
      List<Map<String, Object>> sets = new ArrayList<>();
      for (QueueSource.TagSet t : s.tagSets()) {
        Map<String, Object> x = new LinkedHashMap<>();
        x.put("tags", t.tags());
        if (t.organization() != null) {
          x.put("organization", t.organization());
          x.put("organizationName", t.organizationName());
        }
        x.put("route", t.route());
        x.put("waiting", t.waiting());
        x.put("inFlight", t.inFlight());
        x.put("added", t.added());
        sets.add(x);
      }
      m.put("tagSets", sets);
      out.add(m);
    }
    return out;
  }

  /** For {@code /readyz}: each source, "ok" or why its last look failed. */
  public Map<String, Object> readiness() {
    Map<String, Object> out = new LinkedHashMap<>();
    for (QueueSource.Status s : statuses()) {
      out.put(
          s.name(),
          !s.leading() ? "standby (the leader watches sources)" : s.up() ? "ok" : s.error());
    }
    return out;
  }

  private List<Metrics.SourceJobs> jobs() {
    List<Metrics.SourceJobs> out = new ArrayList<>();
    for (QueueSource.Status s : statuses()) {
      if (!s.leading()) {
        // A standby sees no jobs; its unrouted gauge is 0, so that max() across replicas holds.
        out.add(new Metrics.SourceJobs(s.name(), null, 0));
        continue;
      }
      Map<String, Long> perRoute = new LinkedHashMap<>();
      long unrouted = 0;
      for (QueueSource.TagSet t : s.tagSets()) {
        if (t.route() == null) {
          unrouted += t.waiting();
        } else {
          perRoute.merge(t.route(), t.waiting(), Long::sum);
        }
      }
      perRoute.forEach((route, n) -> out.add(new Metrics.SourceJobs(s.name(), route, n)));
      out.add(new Metrics.SourceJobs(s.name(), null, unrouted));
    }
    return out;
  }

  private Map<String, Boolean> up() {
    Map<String, Boolean> out = new LinkedHashMap<>();
    statuses().forEach(s -> out.put(s.name(), s.up()));
    return out;
  }

  @Override
  public void close() {
    sources.forEach(QueueSource::close);
  }
}
