package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.testing.Sql;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The state machine is written in Java, SQL and the docs; all three must say the same. */
class BuildStateTest {

  private static Set<String> javaTransitions() {
    Set<String> out = new TreeSet<>();
    for (BuildState from : BuildState.values()) {
      for (BuildState to : from.next()) {
        out.add(from.wire() + " -> " + to.wire());
      }
    }
    return out;
  }

  @Test
  void sqlTransitionsMatchTheEnum() {
    Set<String> sql =
        Sql.rows("SELECT from_status, to_status FROM oneshot.build_transitions").stream()
            .map(r -> r.get("from_status") + " -> " + r.get("to_status"))
            .collect(Collectors.toCollection(TreeSet::new));
    assertThat(sql).isEqualTo(javaTransitions());
  }

  @Test
  void sqlCheckConstraintAllowsExactlyTheEnumsStates() {
    String check =
        (String)
            Sql.value(
                "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c"
                    + " WHERE c.conrelid = 'oneshot.builds'::regclass"
                    + " AND c.conname = 'builds_status_check'");
    Set<String> states = new TreeSet<>();
    Matcher m = Pattern.compile("'([a-z]+)'::text").matcher(check);
    while (m.find()) {
      states.add(m.group(1));
    }
    assertThat(states)
        .isEqualTo(
            Arrays.stream(BuildState.values())
                .map(BuildState::wire)
                .collect(Collectors.toCollection(TreeSet::new)));
  }

  @Test
  void theDocumentedTableMatchesTheEnum() throws Exception {
    String doc = Files.readString(Path.of("docs/state-machine.md"));
    Set<String> documented = new TreeSet<>();
    Matcher m = Pattern.compile("(?m)^\\| ([a-z]+) \\| ([a-z]+) \\|").matcher(doc);
    while (m.find()) {
      if (!m.group(1).equals("from")) {
        documented.add(m.group(1) + " -> " + m.group(2));
      }
    }
    assertThat(documented).isEqualTo(javaTransitions());
  }

  @Test
  void theTriggerRefusesAnIllegalTransition() {
    Sql.reset();
    Sql.exec(
        "INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,"
            + " timeout_ms, cancel_grace_ms) VALUES ('r', 0, '{}', 1, 1, 1000, 0)");
    Sql.exec("SELECT oneshot.enqueue('{}', '{\"provisioner\":\"script\",\"command\":[\"true\"]}')");
    Map<String, Object> before = Sql.rows("SELECT status FROM oneshot.builds").get(0);
    assertThatThrownBy(
            () ->
                Sql.exec(
                    "UPDATE oneshot.builds SET status = 'succeeded', finished_at = now()"
                        + " WHERE id = 1"))
        .hasMessageContaining("build 1: pending -> succeeded is not a legal transition");
    assertThat(Sql.rows("SELECT status FROM oneshot.builds").get(0)).isEqualTo(before);
  }

  /**
   * Every change from one status to another, legal or not, as a hand-written UPDATE would make it:
   * a legal one goes through and is on the timeline, any other is refused and changes nothing (the
   * check's trigger runs only for changes its condition, written from build_transitions, does not
   * list). Setting the status a build already has is no transition: allowed, and not recorded.
   */
  @Test
  void everyStatusChangeIsCheckedAndRecordedAsTheTableSays() {
    Sql.reset();
    Sql.exec(
        "INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,"
            + " timeout_ms, cancel_grace_ms) VALUES ('r', 0, '{}', 1, 1, 1000, 0)");
    Set<String> legal = javaTransitions();
    int checked = 0;
    for (BuildState from : BuildState.values()) {
      for (BuildState to : BuildState.values()) {
        long id =
            ((Number)
                    Sql.value(
                        "INSERT INTO oneshot.builds (route, tags, input, status, finished_at,"
                            + " runner_id) VALUES ('r', '{}', '{}', ?,"
                            + " CASE WHEN ? THEN now() END, CASE WHEN ? THEN 'runner' END)"
                            + " RETURNING id",
                        from.wire(),
                        from.terminal(),
                        from == BuildState.RUNNING))
                .longValue();
        long eventsBefore = events(id);
        String change = from.wire() + " -> " + to.wire();
        String update =
            "UPDATE oneshot.builds SET status = ?, reason = 'by hand',"
                + " finished_at = CASE WHEN ? THEN coalesce(finished_at, now()) END,"
                + " runner_id = CASE WHEN ? THEN 'runner' ELSE runner_id END WHERE id = ?";
        Object[] args = {to.wire(), to.terminal(), to == BuildState.RUNNING, id};
        if (from == to) {
          Sql.exec(update, args);
          assertThat(events(id)).as(change).isEqualTo(eventsBefore);
        } else if (legal.contains(change)) {
          Sql.exec(update, args);
          assertThat(
                  Sql.rows(
                      "SELECT from_status, to_status, reason FROM oneshot.build_events"
                          + " WHERE build_id = ? ORDER BY id DESC LIMIT 1",
                      id))
              .as(change)
              .containsExactly(
                  Map.of("from_status", from.wire(), "to_status", to.wire(), "reason", "by hand"));
        } else {
          assertThatThrownBy(() -> Sql.exec(update, args))
              .as(change)
              .hasMessageContaining("build " + id + ": " + change + " is not a legal transition");
          assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id))
              .as(change)
              .isEqualTo(from.wire());
          assertThat(events(id)).as(change).isEqualTo(eventsBefore);
        }
        checked++;
      }
    }
    assertThat(checked).isEqualTo(BuildState.values().length * BuildState.values().length);
  }

  private static long events(long buildId) {
    return Sql.count("SELECT count(*) FROM oneshot.build_events WHERE build_id = ?", buildId);
  }

  @Test
  void finalStatesHaveNoWayOut() {
    for (BuildState s : BuildState.values()) {
      assertThat(s.terminal()).isEqualTo(s.next().isEmpty());
    }
    assertThat(BuildState.SUCCEEDED.terminal()).isTrue();
    assertThat(BuildState.RUNNING.canMoveTo(BuildState.PENDING)).isTrue();
    assertThat(BuildState.PENDING.canMoveTo(BuildState.RUNNING)).isFalse();
  }
}
