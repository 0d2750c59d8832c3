package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every endpoint sent the same classes of bad input a hostile client sends: each is a 4xx naming
 * the field (or the header, or the parameter) with a detail, and no row of any table, nor any
 * sequence, changes.
 */
class BadRequestTest {
  private static final String SCRIPT =
      "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"true\"]}";
  private static TestServer t;
  private static final RecordingLauncher launcher = new RecordingLauncher();
  private static long build;
  private static String runnerToken;

  @BeforeAll
  static void start() {
    t =
        TestServer.with()
            .routes(
                """
                routes:
                  - {name: a, tags: {team: a}, untagged: true, hangTimeout: 1h}
                  - {name: b, tags: {team: b}, hangTimeout: 1h}
                """)
            .launcher(launcher)
            .start();
    build = t.api.submitScript("{\"team\": \"a\"}", "true");
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> launcher.launched.stream().anyMatch(a -> a.buildId() == build));
    Attempt a =
        launcher.launched.stream().filter(x -> x.buildId() == build).findFirst().orElseThrow();
    runnerToken = a.token().value();
    Api.Response acquired = t.api.post("/api/v1/runner/acquire", "{}", runnerToken);
    assertThat(acquired.status()).as(acquired.text()).isEqualTo(200);
  }

  @AfterAll
  static void stop() {
    t.close();
  }

  /** An endpoint, the token it is called with, and a body it would accept. */
  private record Endpoint(String name, String path, String bearer, String valid) {
    boolean runner() {
      return path.startsWith("/api/v1/runner/");
    }
  }

  private static List<Endpoint> endpoints() {
    String admin = TestServer.ADMIN_TOKEN;
    return List.of(
        new Endpoint(
            "submit",
            "/api/v1/builds",
            admin,
            "{\"tags\": {\"team\": \"a\"}, \"input\": " + SCRIPT + "}"),
        new Endpoint("cancel", "/api/v1/builds/" + build + "/cancel", admin, "{}"),
        new Endpoint("rerun", "/api/v1/builds/" + build + "/rerun", admin, "{}"),
        new Endpoint(
            "token create",
            "/api/v1/tokens",
            admin,
            "{\"name\": \"ci\", \"role\": \"viewer\", \"routes\": [\"a\"]}"),
        new Endpoint("token revoke", "/api/v1/tokens/nobody/revoke", admin, "{}"),
        new Endpoint("route hold", "/api/v1/routes/b/hold", admin, "{\"why\": \"x\"}"),
        new Endpoint("route release", "/api/v1/routes/b/release", admin, "{}"),
        new Endpoint("team hold", "/api/v1/teams/b/hold", admin, "{\"why\": \"x\"}"),
        new Endpoint("team release", "/api/v1/teams/b/release", admin, "{}"),
        new Endpoint("acquire", "/api/v1/runner/acquire", runnerToken, "{}"),
        new Endpoint("heartbeat", "/api/v1/runner/heartbeat", runnerToken, "{}"),
        new Endpoint(
            "logs",
            "/api/v1/runner/logs",
            runnerToken,
            "{\"first\": 1, \"lines\": [{\"text\": \"x\"}]}"),
        new Endpoint("took-job", "/api/v1/runner/took-job", runnerToken, "{\"what\": \"job 1\"}"),
        new Endpoint(
            "complete", "/api/v1/runner/complete", runnerToken, "{\"outcome\": \"succeeded\"}"),
        new Endpoint(
            "state",
            "/api/v1/runner/state",
            runnerToken,
            "{\"state\": \"{\\\"version\\\": 4, \\\"serial\\\": 1, \\\"lineage\\\": \\\"L\\\"}\"}"));
  }

  /** A class of bad body: what it makes of an endpoint's valid body, and the answer it must get. */
  private record Bad(
      String name,
      Function<String, byte[]> body,
      String contentType,
      int status,
      String field,
      String says) {
    Bad(String name, Function<String, byte[]> body, String contentType, int status, String field) {
      this(
          name,
          body,
          contentType,
          status,
          field,
          status == 415
              ? "must be application/json"
              : field.equals("body") ? "body: " : "k".equals(field) ? "given twice" : "twice");
    }
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static byte[] concat(byte[]... parts) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  /** {@code {"k": "a<bytes>b"}}: a string holding the given raw bytes. */
  private static byte[] withBytes(int... bytes) {
    byte[] head = utf8("{\"k\": \"a");
    byte[] tail = utf8("b\"}");
    byte[] out = new byte[head.length + bytes.length + tail.length];
    System.arraycopy(head, 0, out, 0, head.length);
    for (int i = 0; i < bytes.length; i++) {
      out[head.length + i] = (byte) bytes[i];
    }
    System.arraycopy(tail, 0, out, head.length + bytes.length, tail.length);
    return out;
  }

  private static final String JSON = "application/json";

  private static List<Bad> bads() {
    return List.of(
        new Bad("trailing garbage", v -> utf8(v + "xyz"), JSON, 400, "body"),
        new Bad("a second object", v -> utf8(v + v), JSON, 400, "body"),
        new Bad("a trailing comma", v -> utf8(v.replaceFirst("}$", ",}")), JSON, 400, "body"),
        new Bad("a key twice", v -> utf8("{\"k\": 1, \"k\": 2}"), JSON, 400, "k"),
        new Bad("a nested key twice", v -> utf8("{\"k\": {\"j\": 1, \"j\": 2}}"), JSON, 400, "k.j"),
        new Bad("text/plain", v -> utf8(v), "text/plain", 415, "Content-Type"),
        new Bad("a form", v -> utf8(v), "application/x-www-form-urlencoded", 415, "Content-Type"),
        new Bad("no Content-Type", v -> utf8(v), null, 415, "Content-Type"),
        new Bad("a Content-Type of ';'", v -> utf8(v), ";", 415, "Content-Type"),
        new Bad(
            "another charset",
            v -> utf8(v),
            "application/json; charset=iso-8859-1",
            415,
            "Content-Type"),
        new Bad(
            "an invalid UTF-8 byte", v -> withBytes(0xff), JSON, 400, "k", "k: not valid UTF-8"),
        new Bad(
            "a cut UTF-8 sequence",
            v -> withBytes(0xe2, 0x82),
            JSON,
            400,
            "k",
            "k: not valid UTF-8"),
        new Bad(
            "an overlong UTF-8 '/'",
            v -> withBytes(0xc0, 0xaf),
            JSON,
            400,
            "k",
            "k: not valid UTF-8"),
        new Bad(
            "an encoded surrogate",
            v -> withBytes(0xed, 0xa0, 0x80),
            JSON,
            400,
            "k",
            "k: not valid UTF-8"),
        new Bad(
            "bad UTF-8 deep down",
            v -> concat(utf8("{\"input\": {\"env\": "), withBytes(0xff), utf8("}}")),
            JSON,
            400,
            "input.env.k",
            "input.env.k: not valid UTF-8"),
        new Bad(
            "a UTF-8 continuation alone",
            v -> withBytes(0x80),
            JSON,
            400,
            "k",
            "k: not valid UTF-8"),
        new Bad("a NUL in a key", v -> utf8("{\"k\\u0000\": 1}"), JSON, 400, "body"),
        new Bad(
            "an unpaired surrogate escape",
            v -> utf8("{\"k\": \"a\\ud800b\"}"),
            JSON,
            400,
            "k",
            "k: not valid UTF-8"),
        new Bad(
            "a number past a double", v -> utf8("{\"k\": 1e400}"), JSON, 400, "k", "out of range"),
        new Bad("nested 300 deep", v -> utf8("{\"k\": " + "[".repeat(300)), JSON, 400, "body"),
        new Bad("an array", v -> utf8("[" + v + "]"), JSON, 400, "body"),
        new Bad("a string", v -> utf8("\"x\""), JSON, 400, "body"),
        new Bad("a number", v -> utf8("1"), JSON, 400, "body"),
        new Bad("malformed", v -> utf8(v.substring(0, v.length() - 1)), JSON, 400, "body"),
        new Bad("NaN", v -> utf8("{\"k\": NaN}"), JSON, 400, "body"),
        new Bad("a comment", v -> utf8("/* x */ " + v), JSON, 400, "body"),
        new Bad("single quotes", v -> utf8("{'k': 1}"), JSON, 400, "body"));
  }

  static Stream<Arguments> badBodies() {
    List<Arguments> out = new ArrayList<>();
    for (Endpoint e : endpoints()) {
      for (Bad b : bads()) {
        out.add(Arguments.of(e.name() + ": " + b.name(), e, b));
      }
    }
    return out.stream();
  }

  private static Api.Response send(Endpoint e, byte[] body, String contentType) {
    return e.runner()
        ? t.api.raw(
            "POST", e.path(), body, contentType, e.bearer(), "Oneshot-Runner-Id", Api.RUNNER)
        : t.api.raw("POST", e.path(), body, contentType, e.bearer());
  }

  private static void refused(Api.Response r, int status, String field) {
    assertThat(r.status()).as(r.text()).isEqualTo(status);
    assertThat(r.json()).as(r.text()).isNotNull();
    assertThat(r.json().path("field").asText()).as(r.text()).isEqualTo(field);
    assertThat(r.json().path("error").asText()).as(r.text()).startsWith(field + ":");
    assertThat(r.json().path("detail").isMissingNode()).as(r.text()).isFalse();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badBodies")
  void everyEndpointEveryBadBody(String name, Endpoint e, Bad b) {
    Map<String, Object> before = Sql.digest();
    Api.Response r = send(e, b.body().apply(e.valid()), b.contentType());
    refused(r, b.status(), b.field());
    assertThat(r.json().path("error").asText()).contains(b.says());
    assertThat(Sql.digest()).isEqualTo(before);
  }

  /**
   * A call that takes no body is answered as it would be without one when it comes with an empty
   * body or {@code {}}, whatever Content-Type it says (the console and the CLI send {@code {}}).
   */
  @org.junit.jupiter.api.Test
  void aCallThatTakesNoBodyAcceptsNoneAndAnEmptyObject() {
    for (String type : new String[] {JSON, null, "text/plain"}) {
      Api.Response none =
          t.api.raw(
              "POST", "/api/v1/tokens/nobody/revoke", new byte[0], type, TestServer.ADMIN_TOKEN);
      assertThat(none.status()).as(none.text()).isEqualTo(404);
    }
    Api.Response empty =
        t.api.raw("POST", "/api/v1/tokens/nobody/revoke", utf8("{}"), JSON, TestServer.ADMIN_TOKEN);
    assertThat(empty.status()).as(empty.text()).isEqualTo(404);
    Api.Response heartbeat =
        t.api.raw(
            "POST",
            "/api/v1/runner/heartbeat",
            new byte[0],
            null,
            runnerToken,
            "Oneshot-Runner-Id",
            Api.RUNNER);
    assertThat(heartbeat.status()).as(heartbeat.text()).isNotEqualTo(400);
  }

  /** Fields of a valid shape but a wrong type or range, each the case a hostile client sent. */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '`',
      textBlock =
          """
          expiresIn a number        | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "expiresIn": 3600} | expiresIn | expiresIn: must be a string
          expiresIn beyond 100y     | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "expiresIn": "999999999999d"} | expiresIn | expiresIn: at most 36500d (100 years)
          expiresAt beyond 100y     | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "expiresAt": "+100000-01-01T00:00:00Z"} | expiresAt | expiresAt: at most 100 years from now
          owner too long            | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "owner": "OWNER"} | owner | owner: at most 200 characters, none of them a control character
          owner with an escape      | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "owner": "a\\u001b[2Jb"} | owner | owner: at most 200 characters, none of them a control character
          owner a number            | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a"], "owner": 7} | owner | owner: must be a string
          a route nowhere           | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": ["a", "zz"]} | routes[1] | routes[1]: no route is named 'zz'
          a route a number          | /api/v1/tokens          | {"name": "x", "role": "viewer", "routes": [7]} | routes[0] | routes[0]: must be a route name
          routeTags selecting none  | /api/v1/tokens          | {"name": "x", "role": "viewer", "routeTags": {"team": "zz"}} | routeTags | routeTags: select no configured route
          routeTags too many        | /api/v1/tokens          | {"name": "x", "role": "viewer", "routeTags": TAGS} | routeTags | routeTags: at most 16 tags
          role a number             | /api/v1/tokens          | {"name": "x", "role": 1, "routes": ["a"]} | role | role: must be a string
          first past 2^53           | /api/v1/runner/logs     | {"first": 9223372036854775807, "lines": [{"text": "x"}]} | first | first: must be the runner's number of the batch's first line, from 1 to 9007199254740991
          first a fraction          | /api/v1/runner/logs     | {"first": 1.5, "lines": [{"text": "x"}]} | first | first: must be the runner's number of the batch's first line, from 1 to 9007199254740991
          a line's stage a number   | /api/v1/runner/logs     | {"first": 1, "lines": [{"text": "x", "stage": 3}]} | lines[0].stage | lines[0].stage: must be a string
          exitCode a fraction       | /api/v1/runner/complete | {"outcome": "failed", "exitCode": 1.5} | exitCode | exitCode: must be an integer from -2147483648 to 2147483647
          exitCode a string         | /api/v1/runner/complete | {"outcome": "failed", "exitCode": "1"} | exitCode | exitCode: must be an integer from -2147483648 to 2147483647
          exitCode past an int      | /api/v1/runner/complete | {"outcome": "failed", "exitCode": 4294967296} | exitCode | exitCode: must be an integer from -2147483648 to 2147483647
          outputs a string          | /api/v1/runner/complete | {"outcome": "succeeded", "outputs": "x"} | outputs | outputs: must be an object of output name to value
          error a number            | /api/v1/runner/complete | {"outcome": "failed", "error": 5} | error | error: must be a string
          usage a string            | /api/v1/runner/complete | {"outcome": "failed", "usage": "oom"} | usage | usage: must be an object
          usage of an unknown kind  | /api/v1/runner/complete | {"outcome": "failed", "usage": {"gpuHours": 1}} | usage.gpuHours | usage.gpuHours: unknown field
          oomKills negative         | /api/v1/runner/complete | {"outcome": "failed", "usage": {"oomKills": -1}} | usage.oomKills | usage.oomKills: must be an integer from 0 to 2147483647
          oomKills a fraction       | /api/v1/runner/complete | {"outcome": "failed", "usage": {"oomKills": 1.5}} | usage.oomKills | usage.oomKills: must be an integer from 0 to 2147483647
          throttled a string        | /api/v1/runner/complete | {"outcome": "failed", "usage": {"cpuThrottledSeconds": "3"}} | usage.cpuThrottledSeconds | usage.cpuThrottledSeconds: must be a number from 0 to 1000000000
          cpu limit negative        | /api/v1/runner/complete | {"outcome": "failed", "usage": {"cpuLimitCores": -0.5}} | usage.cpuLimitCores | usage.cpuLimitCores: must be a number from 0 to 1000000
          a rerun's pod a string    | /api/v1/builds/BUILD/rerun | {"pod": "big"} | pod | pod: must be an object of pod settings, like {"resources": {"limits": {"memory": "1Gi"}}}
          a rerun's unknown option  | /api/v1/builds/BUILD/rerun | {"priority": 5} | priority | priority: unknown field
          what a number             | /api/v1/runner/took-job | {"what": 5} | what | what: must be a string
          a hold without why        | /api/v1/routes/b/hold   | {} | why | why: required: say why the route is held (it is shown with every build the hold keeps waiting)
          a team hold without why   | /api/v1/teams/b/hold    | {"why": null} | why | why: required: say why the team is held (it is shown with every build the hold keeps waiting)
          a hold's why a number     | /api/v1/routes/b/hold   | {"why": 5} | why | why: must be a non-empty string, got 5
          a hold's why blank        | /api/v1/routes/b/hold   | {"why": "  "} | why | why: must be a non-empty string, got "  "
          a hold's why too long     | /api/v1/routes/b/hold   | {"why": "LONGWHY"} | why | why: must be at most 500 characters, got 501
          a hold's why two lines    | /api/v1/routes/b/hold   | {"why": "a\\nb"} | why | why: must be one line of text, without control characters
          a hold's unknown option   | /api/v1/routes/b/hold   | {"why": "x", "until": "1h"} | until | until: unknown field
          state with garbage after  | /api/v1/runner/state    | {"state": "{\\"serial\\": 1, \\"lineage\\": \\"L\\"}garbage"} | state | state: is not a terraform state: Unrecognized token 'garbage': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')
          state with an object after | /api/v1/runner/state   | {"state": "{\\"serial\\": 1, \\"lineage\\": \\"L\\"} {}"} | state | state: is not a terraform state: something follows its object
          state serial a string     | /api/v1/runner/state    | {"state": "{\\"serial\\": \\"1\\", \\"lineage\\": \\"L\\"}"} | state | state: is not a terraform state: serial must be a non-negative integer
          state serial negative     | /api/v1/runner/state    | {"state": "{\\"serial\\": -1, \\"lineage\\": \\"L\\"}"} | state | state: is not a terraform state: serial must be a non-negative integer
          state serial a fraction   | /api/v1/runner/state    | {"state": "{\\"serial\\": 1.5, \\"lineage\\": \\"L\\"}"} | state | state: is not a terraform state: serial must be a non-negative integer
          state without a serial    | /api/v1/runner/state    | {"state": "{\\"lineage\\": \\"L\\"}"} | state | state: is not a terraform state: it has no serial
          state serial twice        | /api/v1/runner/state    | {"state": "{\\"serial\\": 1, \\"serial\\": 9, \\"lineage\\": \\"L\\"}"} | state | state: is not a terraform state: Duplicate field 'serial'
          state cut                 | /api/v1/runner/state    | {"state": "{\\"serial\\": 1, \\"lineage\\": "} | state | state: is not a terraform state: Unexpected end-of-input within/between Object entries
          checkpoint no version     | /api/v1/runner/state    | {"state": "{\\"checkpoint\\": {\\"stack\\": \\"s\\"}}"} | state | state: is not a Pulumi checkpoint: version must be a number (1 to 3)
          checkpoint version 4      | /api/v1/runner/state    | {"state": "{\\"version\\": 4, \\"checkpoint\\": {\\"stack\\": \\"s\\"}}"} | state | state: is not a Pulumi checkpoint: unsupported checkpoint version 4
          checkpoint a list         | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": []}"} | state | state: is not a Pulumi checkpoint: checkpoint must be an object
          checkpoint no stack       | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {}}"} | state | state: is not a Pulumi checkpoint: checkpoint.stack must name the stack
          checkpoint no manifest    | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.manifest must be an object
          checkpoint bad time       | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {\\"manifest\\": {\\"time\\": \\"yesterday\\"}}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.manifest.time is not an RFC 3339 time
          checkpoint resources map  | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {\\"manifest\\": {}, \\"resources\\": {}}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.resources must be an array
          checkpoint resource urn   | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {\\"manifest\\": {}, \\"resources\\": [{\\"type\\": \\"t\\"}]}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.resources[0].urn must be a resource URN
          checkpoint custom a text  | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {\\"manifest\\": {}, \\"resources\\": [{\\"urn\\": \\"u\\", \\"type\\": \\"t\\", \\"custom\\": \\"yes\\"}]}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.resources[0].custom must be true or false
          checkpoint pending type   | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\", \\"latest\\": {\\"manifest\\": {}, \\"pending_operations\\": [{\\"resource\\": {\\"urn\\": \\"u\\", \\"type\\": \\"t\\"}}]}}}"} | state | state: is not a Pulumi checkpoint: checkpoint.latest.pending_operations[0].type must be a string
          checkpoint twice          | /api/v1/runner/state    | {"state": "{\\"version\\": 3, \\"checkpoint\\": {\\"stack\\": \\"s\\"}, \\"checkpoint\\": {}}"} | state | state: is not a Pulumi checkpoint: Duplicate field 'checkpoint'
          """)
  void aFieldOfTheWrongTypeOrRangeIsRefused(
      String name, String path, String body, String field, String error) {
    String tags =
        Json.write(
            java.util.stream.IntStream.range(0, 17)
                .boxed()
                .collect(java.util.stream.Collectors.toMap(i -> "t" + i, i -> "v")));
    Endpoint e =
        new Endpoint(
            name,
            path.replace("BUILD", Long.toString(build)),
            path.startsWith("/api/v1/runner/") ? runnerToken : TestServer.ADMIN_TOKEN,
            null);
    Map<String, Object> before = Sql.digest();
    Api.Response r =
        send(
            e,
            utf8(
                body.replace("OWNER", "o".repeat(201))
                    .replace("TAGS", tags)
                    .replace("LONGWHY", "w".repeat(501))),
            JSON);
    refused(r, 400, field);
    assertThat(r.json().path("error").asText()).isEqualTo(error);
    assertThat(r.text()).doesNotContain("Source:", "REDACTED");
    assertThat(Sql.digest()).isEqualTo(before);
  }

  /**
   * Paths and query parameters: a NUL, bytes that are not UTF-8, a malformed escape and a value too
   * long are 400s naming the parameter, for any endpoint, before anything reads them.
   */
  @ParameterizedTest(name = "{0} {1}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          GET  | /api/v1/builds?tag=org=a%00                 | tag
          GET  | /api/v1/builds?route=%ff                    | route
          GET  | /api/v1/builds?route=%e2%82                 | route
          GET  | /api/v1/builds?status=LONG                  | status
          GET  | /api/v1/builds?na%00me=1                    | query
          GET  | /api/v1/audit?actor=a%00                    | actor
          GET  | /api/v1/workspaces/state?workspace=w%00     | workspace
          GET  | /api/v1/workspaces/state?workspace=w&version=4294967297 | version
          GET  | /api/v1/workspaces/state?workspace=w&version=0 | version
          GET  | /api/v1/workspaces/states?workspace=%c0%af  | workspace
          GET  | /api/v1/workspaces/states?workspace=w&route=a%00 | route
          GET  | /api/v1/workspaces/state?workspace=w&route=%c0%af | route
          GET  | /api/v1/workspaces/state?workspace=w&route=LONG | route
          POST | /api/v1/tokens/a%00b/revoke                 | path
          POST | /api/v1/tokens/a%ffb/revoke                 | path
          GET  | /api/v1/builds/1%00                         | path
          """)
  void aBadPathOrParameterIsRefused(String method, String path, String field) {
    Map<String, Object> before = Sql.digest();
    Api.Response r =
        t.api.raw(
            method,
            path.replace("LONG", "x".repeat(Http.MAX_PARAM_CHARS + 1)),
            null,
            null,
            TestServer.ADMIN_TOKEN);
    refused(r, 400, field);
    assertThat(Sql.digest()).isEqualTo(before);
  }
}
