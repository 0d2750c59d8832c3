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
