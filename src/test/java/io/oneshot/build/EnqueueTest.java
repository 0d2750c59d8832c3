package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.dispatch.Listener;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** oneshot.enqueue(): one validation for every producer, route binding, and its NOTIFY. */
class EnqueueTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  private StoreFixture f;

  @BeforeEach
  void setUp() {
    f =
        new StoreFixture(
            """
            routes:
              - {name: a, tags: {team: a}}
              - {name: gpu, tags: {team: a, gpu: "true"}}
              - {name: b, tags: {team: b}}
            """);
  }

  @AfterEach
  void tearDown() {
    f.close();
  }

  private QueueStore.Enqueued enqueue(String tags) {
    return Database.await(f.store.queue().enqueue(tags, SCRIPT, 0, null));
  }

  @Test
  void bindsTheFirstRouteInFileOrderWhoseTagsContainAllOfTheBuilds() {
    assertThat(enqueue("{\"team\": \"a\"}").route()).isEqualTo("a");
    assertThat(enqueue("{\"gpu\": \"true\"}").route()).isEqualTo("gpu");
    assertThat(enqueue("{\"gpu\": \"true\", \"team\": \"a\"}").route()).isEqualTo("gpu");
    assertThat(enqueue("{\"team\": \"b\"}").route()).isEqualTo("b");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'pending'"))
        .isEqualTo(4);
    assertThat(
            Sql.rows(
                "SELECT from_status, to_status, reason FROM oneshot.build_events WHERE build_id = 1"))
        .containsExactly(row(null, "pending", "enqueued"));
  }

  private static Map<String, Object> row(String from, String to, String reason) {
    java.util.LinkedHashMap<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("from_status", from);
    m.put("to_status", to);
    m.put("reason", reason);
    return m;
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          no route                | {"team": "c"} | SCRIPT | 0 | | tags | tags: no route matches {"team": "c"}
          tags not an object      | ["a"] | SCRIPT | 0 | | tags | tags: must be an object of string values, like {"org": "default"}
          bad tag key             | {"a b": "x"} | SCRIPT | 0 | | tags | tags: "a b" is not a valid tag key
          bad tag value           | {"team": "a b"} | SCRIPT | 0 | | tags.team | tags.team: "a b" is not a valid tag value
          tag value not a string  | {"team": 1} | SCRIPT | 0 | | tags.team | tags.team: must be a string, got number
          input not an object     | {} | "x" | 0 | | input | input: must be an object, like {"provisioner": "script", "command": ["sh", "-c", "echo hi"]}
          no provisioner          | {} | {"command": ["x"]} | 0 | | input.provisioner | input.provisioner: is required: "script", "terraform", "pulumi" or "coder"
          unknown provisioner     | {} | {"provisioner": "ansible"} | 0 | | input.provisioner | input.provisioner: "ansible" is not a provisioner: "script", "terraform", "pulumi" or "coder"
          unknown input field     | {} | {"provisioner": "script", "command": ["x"], "cmd": 1} | 0 | | input.cmd | input.cmd: unknown field
          empty command           | {} | {"provisioner": "script", "command": []} | 0 | | input.command | input.command: is required: a non-empty array of strings, like ["sh", "-c", "echo hi"]
          command element type    | {} | {"provisioner": "script", "command": ["sh", 2]} | 0 | | input.command[1] | input.command[1]: must be a string, got number
          bad env name            | {} | {"provisioner": "script", "command": ["x"], "env": {"1X": "y"}} | 0 | | input.env | input.env: "1X" is not a valid name
          env value type          | {} | {"provisioner": "script", "command": ["x"], "env": {"X": true}} | 0 | | input.env.X | input.env.X: must be a string, got boolean
          terraform without files | {} | {"provisioner": "terraform"} | 0 | | input.files | input.files: is required (or input.git): an object of file name to content, like {"main.tf": "..."}
          terraform escape path   | {} | {"provisioner": "terraform", "files": {"../main.tf": ""}} | 0 | | input.files | input.files: "../main.tf" is not a valid name
          terraform no tf file    | {} | {"provisioner": "terraform", "files": {"README": ""}} | 0 | | input.files | input.files: must contain at least one .tf or .tf.json file
          terraform transition    | {} | {"provisioner": "terraform", "files": {"main.tf": ""}, "transition": "plan"} | 0 | | input.transition | input.transition: must be "apply" or "destroy", got "plan"
          terraform files and git | {} | {"provisioner": "terraform", "files": {"main.tf": ""}, "git": {"url": "https://h/r.git"}} | 0 | | input.git | input.git: is one program with input.files: give one of them
          git without url         | {} | {"provisioner": "terraform", "git": {"ref": "main"}} | 0 | | input.git.url | input.git.url: is required: the repository to clone, like "https://git.example.com/team/infra.git"
          git ext transport       | {} | {"provisioner": "terraform", "git": {"url": "ext::sh -c touch% /tmp/x"}} | 0 | | input.git.url | input.git.url: "ext::sh -c touch% /tmp/x" is not a repository URL git may clone
          git url as an option    | {} | {"provisioner": "terraform", "git": {"url": "--upload-pack=touch /tmp/x"}} | 0 | | input.git.url | input.git.url: "--upload-pack=touch /tmp/x" is not a repository URL git may clone
          git ref as an option    | {} | {"provisioner": "terraform", "git": {"url": "https://h/r.git", "ref": "--upload-pack=x"}} | 0 | | input.git.ref | input.git.ref: "--upload-pack=x" is not a branch, tag or commit
          git ref with dots       | {} | {"provisioner": "terraform", "git": {"url": "https://h/r.git", "ref": "a..b"}} | 0 | | input.git.ref | input.git.ref: "a..b" is not a branch, tag or commit
          git path escapes        | {} | {"provisioner": "pulumi", "project": "p", "stack": "s", "git": {"url": "https://h/r.git", "path": "../x"}} | 0 | | input.git.path | input.git.path: "../x" is not a directory of the repository
          git unknown field       | {} | {"provisioner": "terraform", "git": {"url": "https://h/r.git", "branch": "x"}} | 0 | | input.git.branch | input.git.branch: unknown field
          pulumi without project  | {} | {"provisioner": "pulumi", "stack": "dev", "files": {"Pulumi.yaml": ""}} | 0 | | input.project | input.project: is required: the project name of the program (Pulumi.yaml)
          pulumi bad project      | {} | {"provisioner": "pulumi", "project": "a/b", "stack": "dev", "files": {"Pulumi.yaml": ""}} | 0 | | input.project | input.project: "a/b" is not a Pulumi project name
          pulumi without stack    | {} | {"provisioner": "pulumi", "project": "p", "files": {"Pulumi.yaml": ""}} | 0 | | input.stack | input.stack: is required: the stack to update, like "dev"
          pulumi stack with org   | {} | {"provisioner": "pulumi", "project": "p", "stack": "organization/p/dev", "files": {"Pulumi.yaml": ""}} | 0 | | input.stack | input.stack: "organization/p/dev" is not a Pulumi stack name
          pulumi operation        | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "operation": "apply", "files": {"Pulumi.yaml": ""}} | 0 | | input.operation | input.operation: must be "up", "preview", "destroy" or "refresh", got "apply"
          pulumi without program  | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev"} | 0 | | input.files | input.files: is required (or input.git): an object of file name to content, like {"Pulumi.yaml": "..."}
          pulumi no project file  | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"index.ts": ""}} | 0 | | input.files | input.files: must contain the project file, Pulumi.yaml
          pulumi config a list    | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"Pulumi.yaml": ""}, "config": []} | 0 | | input.config | input.config: must be an object of config key to value, like {"aws:region": "eu-west-1"}, got array
          pulumi config bad key   | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"Pulumi.yaml": ""}, "config": {"a b": "x"}} | 0 | | input.config.a b | input.config.a b: is not a config key
          pulumi config object    | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"Pulumi.yaml": ""}, "config": {"k": {"a": 1}}} | 0 | | input.config.k | input.config.k: must be a string, number or boolean, got object
          pulumi sensitive absent | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"Pulumi.yaml": ""}, "config": {"k": "v"}, "sensitive": ["db"]} | 0 | | input.sensitive[0] | input.sensitive[0]: "db" is not in input.config
          pulumi variables field  | {} | {"provisioner": "pulumi", "project": "p", "stack": "dev", "files": {"Pulumi.yaml": ""}, "variables": {}} | 0 | | input.variables | input.variables: unknown field
          priority out of range   | {} | SCRIPT | 5000 | | priority | priority: must be an integer from -1000 to 1000, got 5000
          bad workspace           | {} | SCRIPT | 0 | ../etc | workspace | workspace: "../etc" is not a valid workspace key
          """)
  void refusesBadInputNamingTheFieldAndWritesNothing(
      String name,
      String tags,
      String input,
      int priority,
      String workspace,
      String field,
      String message) {
    String in = input.equals("SCRIPT") ? SCRIPT : input;
    assertThatThrownBy(() -> Database.await(f.store.queue().enqueue(tags, in, priority, workspace)))
        .isInstanceOfSatisfying(
            InvalidBuildException.class,
            e -> {
              assertThat(e.field()).isEqualTo(field);
              assertThat(e.getMessage()).isEqualTo(message);
            });
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.build_events")).isZero();
  }

  @Test
  void anUntaggedBuildIsRefusedWhenNoRouteTakesUntaggedBuilds() {
    assertThatThrownBy(() -> enqueue("{}"))
        .isInstanceOfSatisfying(
            InvalidBuildException.class,
            e -> {
              assertThat(e.field()).isEqualTo("tags");
              assertThat(e.getMessage()).isEqualTo("tags: no route takes builds without tags");
              assertThat(e.hint())
                  .isEqualTo(
                      "give the build tags a route matches, or set untagged: true on a route;"
                          + " routes: a {\"team\": \"a\"}, gpu {\"gpu\": \"true\", \"team\":"
                          + " \"a\"}, b {\"team\": \"b\"}");
            });
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }

  @Test
  void anUntaggedBuildGoesToTheFirstRouteThatTakesThemAndTaggedOnesRouteAsBefore() {
    f.close();
    f =
        new StoreFixture(
            """
            routes:
              - {name: a, tags: {team: a}}
              - {name: b, tags: {team: b}, untagged: true}
              - {name: c, tags: {team: c}}
            """);
    assertThat(enqueue("{}").route()).isEqualTo("b");
    assertThat(enqueue("{\"team\": \"a\"}").route()).isEqualTo("a");
    assertThat(enqueue("{\"team\": \"b\"}").route()).isEqualTo("b");
    // The route that takes untagged builds is chosen by the flag, not by matching tags.
    Sql.exec("UPDATE oneshot.routes SET untagged = (name = 'c')");
    assertThat(enqueue("{}").route()).isEqualTo("c");
  }

  @Test
  void noRouteErrorListsTheRoutes() {
    assertThatThrownBy(() -> enqueue("{\"os\": \"plan9\"}"))
        .isInstanceOfSatisfying(
            InvalidBuildException.class,
            e ->
                assertThat(e.hint())
                    .isEqualTo(
                        "a route matches when its tags contain all of the build's tags; routes:"
                            + " a {\"team\": \"a\"}, gpu {\"gpu\": \"true\", \"team\": \"a\"},"
                            + " b {\"team\": \"b\"}"));
  }

  @Test
  void anOversizeInputIsRefusedAgainstTheConfiguredCap() {
    Sql.exec("UPDATE oneshot.limits SET max_input_bytes = 2048");
    String big =
        "{\"provisioner\": \"script\", \"command\": [\"echo\", \"" + "x".repeat(3000) + "\"]}";
    assertThatThrownBy(() -> Database.await(f.store.queue().enqueue("{}", big, 0, null)))
        .isInstanceOfSatisfying(
            InvalidBuildException.class,
            e -> {
              assertThat(e.field()).isEqualTo("input");
              assertThat(e.getMessage())
                  .startsWith("input: is 30")
                  .endsWith("bytes; the limit is 2048 bytes");
            });
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }

  @Test
  void aBatchInOneTransactionNotifiesOnceAndARollbackNotifiesNothing() throws Exception {
    BlockingQueue<String> got = new LinkedBlockingQueue<>();
    BlockingQueue<Boolean> listening = new LinkedBlockingQueue<>();
    Listener listener =
        new Listener(
            f.vertx,
            f.db.connectOptions("test-listener"),
            Map.of("oneshot_builds", got::add, "test_sentinel", p -> got.add("sentinel:" + p)),
            () -> listening.add(true),
            Duration.ofSeconds(10),
            f.config.database().reconnect());
    listener.start();
    try {
      assertThat(listening.poll(10, TimeUnit.SECONDS)).isTrue();
      try (Connection c = Sql.connect()) {
        c.setAutoCommit(false);
        Sql.rows(
            c,
            "SELECT oneshot.enqueue('{\"team\": \"a\"}', ?::jsonb) FROM generate_series(1, 50)",
            SCRIPT);
        c.commit();
        Sql.rows(c, "SELECT oneshot.enqueue('{\"team\": \"a\"}', ?::jsonb)", SCRIPT);
        c.rollback();
        Sql.rows(c, "SELECT pg_notify('test_sentinel', 'after')");
        c.commit();
      }
      assertThat(got.poll(10, TimeUnit.SECONDS)).isEqualTo("");
      assertThat(got.poll(10, TimeUnit.SECONDS)).isEqualTo("sentinel:after");
      assertThat(got).isEmpty();
      assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(50);
    } finally {
      listener.close();
    }
  }

  @Test
  void theEnqueueTriggerIsStatementLevel() throws SQLException {
    List<Map<String, Object>> t =
        Sql.rows(
            "SELECT tgname, (tgtype & 1) = 0 AS per_statement FROM pg_trigger"
                + " WHERE tgrelid = 'oneshot.builds'::regclass AND tgname = 'builds_notify_enqueued'");
    assertThat(t).hasSize(1);
    assertThat(t.get(0).get("per_statement")).isEqualTo(true);
  }
}
