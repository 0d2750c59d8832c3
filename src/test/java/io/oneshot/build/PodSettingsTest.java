package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.api.Json;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A build's own pod settings (input.pod) held to its route's rules by oneshot.enqueue(), the one
 * path every producer takes: allowed as asked, clamped with a note, or refused naming the field and
 * the rule, with nothing written.
 */
class PodSettingsTest {
  private static final String CONFIG =
      """
      api: {publicUrl: "http://127.0.0.1:8080"}
      launcher: {kind: kubernetes}
      routes:
        - name: a
          tags: {t: a}
          untagged: true
          template: script.yaml
          pod:
            maxRequests: {cpu: "2", memory: 4Gi}
            maxLimits: {cpu: "4", memory: 8Gi}
            images: ["ghcr.io/acme/*", "registry.example.com/tools:1.?"]
            nodeSelector: {pool: [gpu, "cpu-*"]}
            tolerations: [gpu]
            labels: {cost-center: ["*"], "team.example.com/*": [a, b]}
            annotations: {"example.com/note": ["*"]}
            serviceAccounts: [builder]
        - name: strict
          tags: {t: strict}
          template: script.yaml
          pod: {overLimit: refuse, maxRequests: {memory: 1Gi}, maxLimits: {memory: 2Gi}}
        - name: none
          tags: {t: none}
          template: script.yaml
      """;

  private StoreFixture f;

  @BeforeEach
  void setUp() {
    f =
        new StoreFixture(
            "routes: [{name: a, untagged: true}, {name: strict, tags: {t: strict}},"
                + " {name: none, tags: {t: none}}]");
    OneshotConfig c = ConfigLoader.parse(CONFIG, "test", Map.of());
    // The templates' own container asks for 256Mi, limited to 512Mi (job-templates/script.yaml).
    Database.await(
        f.store
            .routeMirror()
            .write(
                c.routes(),
                c.limits(),
                r ->
                    Map.of(
                        "requests", Map.of("cpu", "100m", "memory", "256Mi"),
                        "limits", Map.of("memory", "512Mi"))));
  }

  @AfterEach
  void tearDown() {
    f.close();
  }

  private QueueStore.Enqueued enqueue(String tags, String pod) {
    return Database.await(
        f.store
            .queue()
            .enqueue(
                tags,
                "{\"provisioner\": \"script\", \"command\": [\"true\"], \"pod\": " + pod + "}",
                0,
                null));
  }

  private static String stored(long id) {
    return Json.write(
        Json.tree(
            String.valueOf(Sql.value("SELECT input->'pod' FROM oneshot.builds WHERE id = ?", id))));
  }

  @Test
  void whatTheRouteAllowsIsKeptAsAsked() {
    String pod =
        """
        {"resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"memory": "3Gi"}},
         "image": "registry.example.com/tools:1.4",
         "nodeSelector": {"pool": "cpu-large"},
         "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
         "labels": {"cost-center": "4711", "team.example.com/owner": "b"},
         "annotations": {"example.com/note": "anything, even with spaces"},
         "serviceAccount": "builder"}
        """;
    QueueStore.Enqueued e = enqueue("{\"t\": \"a\"}", pod);
    assertThat(e.notes()).isEmpty();
    assertThat(Json.tree(stored(e.id()))).isEqualTo(Json.tree(pod));
    assertThat(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", e.id()))
        .isEqualTo("enqueued");
    // A number is a quantity too, kept as text.
    e = enqueue("{\"t\": \"a\"}", "{\"resources\": {\"requests\": {\"cpu\": 1}}}");
    assertThat(stored(e.id())).isEqualTo("{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}");
  }

  @Test
  void aSizeOverTheRoutesMaximumIsClampedAndSaysSo() {
    QueueStore.Enqueued e =
        enqueue(
            "{\"t\": \"a\"}",
            "{\"resources\": {\"requests\": {\"memory\": \"6Gi\"}, \"limits\": {\"memory\":"
                + " \"16Gi\", \"cpu\": \"3\"}}}");
    assertThat(e.notes())
        .containsExactly(
            "requests.memory 6Gi is over route a's maximum: clamped to 4Gi",
            "limits.memory 16Gi is over route a's maximum: clamped to 8Gi");
    assertThat(Json.tree(stored(e.id())))
        .isEqualTo(
            Json.tree(
                "{\"resources\": {\"requests\": {\"memory\": \"4Gi\"}, \"limits\": {\"memory\":"
                    + " \"8Gi\", \"cpu\": \"3\"}}}"));
    // In its log and its timeline.
    assertThat(
            Sql.rows(
                "SELECT level, text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq",
                e.id()))
        .extracting(r -> r.get("level") + " " + r.get("text"))
        .containsExactly(
            "warn requests.memory 6Gi is over route a's maximum: clamped to 4Gi",
            "warn limits.memory 16Gi is over route a's maximum: clamped to 8Gi");
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? ORDER BY id LIMIT 1",
                e.id()))
        .isEqualTo(
            "enqueued; requests.memory 6Gi is over route a's maximum: clamped to 4Gi; limits.memory"
                + " 16Gi is over route a's maximum: clamped to 8Gi");
  }

  @Test
  void aRouteThatRefusesOverLimitRefusesWithTheMaximumNamedAndNothingWritten() {
    assertThatThrownBy(
            () ->
                enqueue(
                    "{\"t\": \"strict\"}",
                    "{\"resources\": {\"requests\": {\"memory\": \"1536Mi\"}, \"limits\":"
                        + " {\"memory\": \"2Gi\"}}}"))
        .isInstanceOf(InvalidBuildException.class)
        .hasMessageContaining(
            "input.pod.resources.requests.memory: 1536Mi is over route strict's maximum of 1Gi");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
    assertThat(
            enqueue(
                    "{\"t\": \"strict\"}",
                    "{\"resources\": {\"requests\": {\"memory\": \"1Gi\"}, \"limits\": {\"memory\": \"2Gi\"}}}")
                .notes())
        .isEmpty();
  }

  /** Refused at enqueue, from SQL as from the API: the field, the rule, nothing written. */
  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          a route that allows none    | {"t": "none"} | {"image": "x"}                                            | input.pod: route none takes no pod settings from its builds
          not an object               | {"t": "a"}    | "big"                                                     | input.pod: must be an object, got string
          an unknown setting          | {"t": "a"}    | {"privileged": true}                                      | input.pod.privileged: unknown field
          a quantity that is not one  | {"t": "a"}    | {"resources": {"requests": {"cpu": "lots"}}}              | input.pod.resources.requests.cpu: "lots" is not a quantity
          a resource not allowed      | {"t": "a"}    | {"resources": {"limits": {"nvidia.com/gpu": "1"}}}        | input.pod.resources.limits.nvidia.com/gpu: route a lets builds ask for no limits of nvidia.com/gpu
          a request over its limit    | {"t": "a"}    | {"resources": {"requests": {"memory": "1Gi"}}}            | input.pod.resources.requests.memory: 1Gi is above the memory limit its pod would have (512Mi, its template's)
          a request over its own limit| {"t": "a"}    | {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}} | input.pod.resources.requests.memory: 2Gi is above the memory limit its pod would have (1Gi)
          an image outside            | {"t": "a"}    | {"image": "docker.io/library/alpine"}                     | input.pod.image: docker.io/library/alpine is not an image route a allows
          an image pattern's ?        | {"t": "a"}    | {"image": "registry.example.com/tools:1.10"}              | input.pod.image: registry.example.com/tools:1.10 is not an image route a allows
          a label of oneshot's        | {"t": "a"}    | {"labels": {"oneshot.io/build": "7"}}                     | input.pod.labels.oneshot.io/build: the key oneshot.io/build is oneshot's own
          a label of Kubernetes'      | {"t": "a"}    | {"labels": {"app.kubernetes.io/name": "x"}}               | input.pod.labels.app.kubernetes.io/name: the key app.kubernetes.io/name is reserved by Kubernetes
          a label key not allowed     | {"t": "a"}    | {"labels": {"team": "a"}}                                 | input.pod.labels.team: route a lets builds set no label team
          a label value not allowed   | {"t": "a"}    | {"labels": {"team.example.com/owner": "c"}}               | input.pod.labels.team.example.com/owner: "c" is not a value route a allows
          a label value Kubernetes refuses | {"t": "a"} | {"labels": {"cost-center": "a b"}}                      | input.pod.labels.cost-center: "a b" is not a valid value
          a node selector not allowed | {"t": "a"}    | {"nodeSelector": {"zone": "a"}}                           | input.pod.nodeSelector.zone: route a lets builds set no node selector entry zone
          a node pool not allowed     | {"t": "a"}    | {"nodeSelector": {"pool": "spot"}}                        | input.pod.nodeSelector.pool: "spot" is not a value route a allows
          a toleration of everything  | {"t": "a"}    | {"tolerations": [{"operator": "Exists"}]}                 | input.pod.tolerations[0].key: is required
          a taint not allowed         | {"t": "a"}    | {"tolerations": [{"key": "dedicated", "operator": "Exists"}]} | input.pod.tolerations[0].key: route a lets builds tolerate no taint dedicated
          a toleration's effect       | {"t": "a"}    | {"tolerations": [{"key": "gpu", "effect": "Sometimes"}]}  | input.pod.tolerations[0].effect: must be
          seconds without NoExecute   | {"t": "a"}    | {"tolerations": [{"key": "gpu", "tolerationSeconds": 5}]} | input.pod.tolerations[0].tolerationSeconds: must be a whole number of seconds, with the effect NoExecute
          an annotation of oneshot's  | {"t": "a"}    | {"annotations": {"oneshot.io/route": "x"}}                | input.pod.annotations.oneshot.io/route: the key oneshot.io/route is oneshot's own
          a service account not allowed | {"t": "a"}  | {"serviceAccount": "oneshot"}                             | input.pod.serviceAccount: "oneshot" is not a service account route a's builds may run as
          """)
  void anythingTheRouteDoesNotAllowIsRefused(String what, String tags, String pod, String message) {
    assertThatThrownBy(() -> enqueue(tags, pod))
        .as(what)
        .isInstanceOf(InvalidBuildException.class)
        .hasMessageContaining(message);
    // A producer in SQL meets the same rule.
    assertThatThrownBy(
            () ->
                Sql.value(
                    "SELECT id FROM oneshot.enqueue(?::jsonb, ?::jsonb)",
                    tags,
                    "{\"provisioner\": \"script\", \"command\": [\"true\"], \"pod\": " + pod + "}"))
        .as(what)
        .hasMessageContaining(message);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).as(what).isZero();
  }

  @Test
  void theRulesAreMirroredWithTheirPatternsAsWrittenAndAsRegularExpressions() {
    var rules =
        Json.tree(
            String.valueOf(Sql.value("SELECT pod_rules FROM oneshot.routes WHERE name = 'a'")));
    assertThat(rules.path("images").get(1).path("glob").asText())
        .isEqualTo("registry.example.com/tools:1.?");
    assertThat(rules.path("images").get(1).path("regex").asText())
        .isEqualTo("^registry\\.example\\.com\\/tools\\:1\\..$");
    assertThat(rules.path("template").path("limits").path("memory").asText()).isEqualTo("512Mi");
    assertThat(Sql.value("SELECT pod_rules FROM oneshot.routes WHERE name = 'none'")).isNull();
    List<Object> q =
        List.of(
            Sql.value("SELECT oneshot.quantity('500m')"),
            Sql.value("SELECT oneshot.quantity('4Gi')"),
            Sql.value("SELECT oneshot.quantity('1e3')"));
    assertThat(q)
        .extracting(Object::toString)
        .containsExactly("0.500", "4294967296", "1000.0000000000000000");
  }
}
