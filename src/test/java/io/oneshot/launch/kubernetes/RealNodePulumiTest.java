package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.testing.Api;
import io.oneshot.testing.FakePulumi;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Pulumi builds on the real node, from job-templates/pulumi.yaml: the stand-in CLI ({@link
 * FakePulumi}) in each pod, mounted from the host with its classes. A stack's update killed by the
 * kernel for memory keeps what Pulumi saved; a burst of stacks of one project each gets its pod and
 * its own checkpoint.
 */
class RealNodePulumiTest {
  private RealCluster k;
  private String ns;
  private TestServer t;
  private Path standIn;

  private static final String ROUTES =
      """
      routes:
        - {name: stacks, tags: {tool: pulumi}, template: pulumi.yaml, maxConcurrent: 6, cancelGrace: 20s}
      """;

  @BeforeEach
  void setUp() throws IOException {
    k = RealCluster.get();
    ns = k.namespace("real-pulumi");
    standIn = standIn();
  }

  @AfterEach
  void tearDown() throws IOException {
    try {
      if (t != null) {
        t.close();
      }
    } finally {
      if (k != null && ns != null) {
        k.delete(ns);
      }
      if (standIn != null) {
        try (Stream<Path> w = Files.walk(standIn)) {
          for (Path p : w.sorted(java.util.Comparator.reverseOrder()).toList()) {
            Files.deleteIfExists(p);
          }
        }
      }
    }
  }

  /**
   * A directory the pods mount (readable by their user): the stand-in's classes and a {@code
   * pulumi} that runs them on the image's Java, with oneshot's classes, with room for its heap (a
   * memory limit is the container's to enforce, not the JVM's).
   */
  private static Path standIn() throws IOException {
    Path dir =
        Files.createTempDirectory(
            "oneshot-pulumi-",
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
    Path classes = Path.of("target/test-classes/io/oneshot/testing");
    Path to = Files.createDirectories(dir.resolve("classes/io/oneshot/testing"));
    try (Stream<Path> s = Files.list(classes)) {
      for (Path c : s.filter(p -> p.getFileName().toString().startsWith("FakePulumi")).toList()) {
        Files.copy(c, to.resolve(c.getFileName()));
      }
    }
    Path bin = dir.resolve("pulumi");
    Files.writeString(
        bin,
        "#!/bin/sh\nexec java -Xmx1g -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto"
            + " --enable-native-access=ALL-UNNAMED"
            + " -cp \"/opt/oneshot-test/classes:$(cat /opt/oneshot/classpath)\" "
            + FakePulumi.class.getName()
            + " \"$@\"\n");
    try (Stream<Path> w = Files.walk(dir)) {
      for (Path p : w.toList()) {
        Files.setPosixFilePermissions(
            p,
            PosixFilePermissions.fromString(
                Files.isDirectory(p) || p.equals(bin) ? "rwxr-xr-x" : "rw-r--r--"));
      }
    }
    return dir;
  }

  /** {@code text} with {@code from} replaced: it must be there (the shipped template changed). */
  private static String swap(String text, String from, String to) {
    if (!text.contains(from)) {
      throw new AssertionError("job-templates/pulumi.yaml no longer holds:\n" + from);
    }
    return text.replace(from, to);
  }

  /** The shipped template, run here: the stand-in mounted, a passphrase, a size per test. */
  private void start(String memoryLimit) throws IOException {
    Path dir =
        k.templates(
            Files.createTempDirectory("oneshot-templates-"),
            tpl -> {
              if (!tpl.contains("component: pulumi")) {
                return tpl;
              }
              String x =
                  swap(
                      tpl,
                      "              valueFrom:\n"
                          + "                secretKeyRef:\n"
                          + "                  name: pulumi-passphrase\n"
                          + "                  key: passphrase\n",
                      "              value: correct-horse\n");
              x =
                  swap(
                      x,
                      "            - name: PULUMI_HOME\n",
                      "            - name: ONESHOT_PULUMI\n"
                          + "              value: /opt/oneshot-test/pulumi\n"
                          + "            - name: PULUMI_HOME\n");
              x = swap(x, "cpu: \"1\"", "cpu: 100m");
              x = swap(x, "memory: 1Gi", "memory: 256Mi");
              x = swap(x, "memory: 2Gi", "memory: " + memoryLimit);
              x =
                  swap(
                      x,
                      "            - name: tmp\n              mountPath: /tmp\n",
                      "            - name: tmp\n              mountPath: /tmp\n"
                          + "            - name: stand-in\n"
                          + "              mountPath: /opt/oneshot-test\n"
                          + "              readOnly: true\n");
              return swap(
                  x,
                  "        - name: tmp\n          emptyDir: {}\n",
                  "        - name: tmp\n          emptyDir: {}\n"
                      + "        - name: stand-in\n"
                      + "          hostPath:\n"
                      + "            path: "
                      + standIn
                      + "\n");
            });
    t =
        k.server(ns, dir, Ports.stable(), "ttlSecondsAfterFinished: 600")
            .dispatch(
                "maxConcurrent: 12, pollInterval: 200ms, rescueInterval: 300ms, heartbeatInterval: 300ms")
            .routes(ROUTES)
            .start();
  }

  private long submit(String stack, String resources) {
    ObjectNode input = Json.MAPPER.createObjectNode();
    input.put("provisioner", "pulumi");
    input.put("project", "web");
    input.put("stack", stack);
    input
        .putObject("files")
        .put(
            "Pulumi.yaml",
            "name: web\nruntime: yaml\nresources:\n"
                + resources.indent(2)
                + "outputs:\n  stack: "
                + stack
                + "\n");
    ObjectNode body = Json.MAPPER.createObjectNode();
    body.putObject("tags").put("tool", "pulumi");
    body.put("workspace", "web-" + stack);
    body.set("input", input);
    Api.Response r = t.api.post("/api/v1/builds", Json.write(body));
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  private static String awaitEnd(long id) {
    await()
        .atMost(5, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private static String log(long id) {
    StringBuilder b = new StringBuilder();
    for (var l :
        Sql.rows("SELECT text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", id)) {
      b.append(l.get("text")).append('\n');
    }
    return b.toString();
  }

  private JsonNode checkpoint(String stack) {
    Api.Response r = t.api.get("/api/v1/workspaces/state?workspace=web-" + stack);
    assertThat(r.status()).as(r.text()).isEqualTo(200);
    return Json.tree(r.text());
  }

  private static Set<String> names(JsonNode checkpoint, String field) {
    Set<String> out = new HashSet<>();
    for (JsonNode r : checkpoint.path("checkpoint").path("latest").path(field)) {
      JsonNode res = field.equals("resources") ? r : r.path("resource");
      String urn = res.path("urn").asText();
      if (!res.path("type").asText().equals("pulumi:pulumi:Stack")) {
        out.add(urn.substring(urn.lastIndexOf("::") + 2));
      }
    }
    return out;
  }

  @Test
  void anUpdateKilledForMemoryKeepsWhatPulumiSavedWithItsPendingOperation() throws IOException {
    start("300Mi");
    long id =
        submit(
            "oom",
            """
            small:
              type: test:index:Bucket
              properties: {size: 1}
            big:
              type: test:index:Cache
              properties: {allocateMb: 700, createMs: 60000}
            """);
    assertThat(awaitEnd(id)).as(log(id)).isEqualTo("failed");
    String error = Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id).toString();
    assertThat(error).as(log(id)).startsWith("pulumi up failed (exit code 137)").contains("OOM");
    // Read back: the resource made before, and the one Pulumi was making when it was killed.
    JsonNode cp = checkpoint("oom");
    assertThat(names(cp, "resources")).containsExactly("small");
    assertThat(names(cp, "pending_operations")).containsExactly("big");
  }

  @Test
  void aBurstOfStacksOfOneProjectEachGetsItsPodAndItsCheckpoint() throws IOException {
    start("512Mi");
    List<Long> ids = new ArrayList<>();
    int stacks = 10;
    for (int i = 0; i < stacks; i++) {
      ids.add(
          submit(
              "s" + i,
              """
              bucket:
                type: test:index:Bucket
                properties: {size: %d, createMs: 500}
              """
                  .formatted(i)));
    }
    for (long id : ids) {
      assertThat(awaitEnd(id)).as(log(id)).isEqualTo("succeeded");
    }
    for (int i = 0; i < stacks; i++) {
      JsonNode cp = checkpoint("s" + i);
      assertThat(cp.path("checkpoint").path("stack").asText()).isEqualTo("organization/web/s" + i);
      assertThat(names(cp, "resources")).containsExactly("bucket");
    }
    // Each its own Job and pod.
    assertThat(
            k.admin
                .batch()
                .v1()
                .jobs()
                .inNamespace(ns)
                .withLabel("oneshot.io/route", "stacks")
                .list()
                .getItems())
        .hasSize(stacks);
  }

  @Test
  void aCanceledUpdateStopsAtASafePointAndKeepsItsCheckpoint() throws IOException {
    start("512Mi");
    long id =
        submit(
            "cancel",
            """
            first:
              type: test:index:Bucket
              properties: {size: 1}
            second:
              type: test:index:Bucket
              properties: {size: 2, createMs: 4000}
            third:
              type: test:index:Bucket
              properties: {size: 3}
            """);
    await()
        .atMost(3, TimeUnit.MINUTES)
        .until(() -> log(id).contains("test:index:Bucket second creating"));
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(awaitEnd(id)).as(log(id)).isEqualTo("canceled");
    assertThat(log(id)).contains("^C received; cancelling");
    JsonNode cp = checkpoint("cancel");
    assertThat(names(cp, "resources")).containsExactlyInAnyOrder("first", "second");
    assertThat(names(cp, "pending_operations")).isEmpty();
  }
}
