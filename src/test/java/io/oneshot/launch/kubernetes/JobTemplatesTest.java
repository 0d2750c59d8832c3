package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigException;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class JobTemplatesTest {
  private static final KubernetesSerialization SER = new KubernetesSerialization();
  @TempDir Path dir;

  @Test
  void everyShippedTemplateLoadsAndValidates() throws Exception {
    List<Path> shipped;
    try (Stream<Path> s = Files.list(Path.of("job-templates"))) {
      shipped = s.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
    }
    assertThat(shipped)
        .extracting(p -> p.getFileName().toString())
        .contains("script.yaml", "terraform.yaml", "coder.yaml", "pulumi.yaml");
    for (Path p : shipped) {
      Job job = JobTemplates.parse(p, SER);
      assertThat(job.getSpec().getTemplate().getSpec().getContainers())
          .anyMatch(c -> c.getName().equals("provisionerd"));
    }
  }

  private Path write(String yaml) throws Exception {
    Path f = dir.resolve("t.yaml");
    Files.writeString(f, yaml);
    return f;
  }

  private static final String OK_SPEC =
      """
      spec:
        %s
        template:
          spec:
            %s
            containers:
              - name: %s
                image: oneshot
      """;

  private static String job(String specExtra, String podExtra, String container) {
    return "apiVersion: batch/v1\nkind: Job\n" + OK_SPEC.formatted(specExtra, podExtra, container);
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      textBlock =
          """
          no provisionerd container | CONTAINER=runner          | has no container named provisionerd; oneshot runs `oneshot provisionerd` in it
          restartPolicy Always      | POD=restartPolicy: Always | spec.template.spec.restartPolicy: Always would start provisionerd again and run the build twice; use Never (the default)
          restartPolicy OnFailure   | POD=restartPolicy: OnFailure | spec.template.spec.restartPolicy: OnFailure would start provisionerd again and run the build twice; use Never (the default)
          backoffLimit              | SPEC=backoffLimit: 3      | spec.backoffLimit: 3 would retry the pod and run the build twice; oneshot retries with a new attempt itself. Remove it (or set 0)
          parallelism               | SPEC=parallelism: 2       | spec.completions and spec.parallelism must be 1: one build, one pod
          selector                  | SPEC=manualSelector: true | spec.selector is set by Kubernetes for each Job; remove it
          """)
  void badTemplatesAreRefusedSayingWhy(String name, String change, String message)
      throws Exception {
    String spec = change.startsWith("SPEC=") ? change.substring(5) : "";
    String pod = change.startsWith("POD=") ? change.substring(4) : "";
    String container = change.startsWith("CONTAINER=") ? change.substring(10) : "provisionerd";
    Path f = write(job(spec, pod, container));
    assertThatThrownBy(() -> JobTemplates.parse(f, SER))
        .isInstanceOf(ConfigException.class)
        .hasMessageEndingWith(message)
        .hasMessageStartingWith(f.toString());
  }

  @Test
  void everyRuleATemplateBreaksIsReportedAtOnceForEachRouteThatNamesIt() throws Exception {
    Files.writeString(
        dir.resolve("bad.yaml"), job("backoffLimit: 3", "restartPolicy: OnFailure", "runner"));
    Files.writeString(
        dir.resolve("good.yaml"), job("", "terminationGracePeriodSeconds: 40", "provisionerd"));
    OneshotConfig c =
        ConfigLoader.parse(
            """
            routes:
              - {name: a, tags: {org: a}, template: bad.yaml}
              - {name: b, tags: {org: b}, template: good.yaml, cancelGrace: 60s}
              - {name: c, tags: {org: c}, template: missing.yaml}
            """,
            "oneshot.yaml",
            Map.of());
    Path bad = dir.resolve("bad.yaml");
    assertThatThrownBy(() -> JobTemplates.load(dir, c.routes(), SER))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            "5 problems:\n  routes[0].template: "
                + bad
                + ": spec.template.spec.containers has no container named provisionerd; oneshot"
                + " runs `oneshot provisionerd` in it\n  routes[0].template: "
                + bad
                + ": spec.template.spec.restartPolicy: OnFailure would start provisionerd again"
                + " and run the build twice; use Never (the default)\n  routes[0].template: "
                + bad
                + ": spec.backoffLimit: 3 would retry the pod and run the build twice; oneshot"
                + " retries with a new attempt itself. Remove it (or set 0)\n  routes[1].template: "
                + dir.resolve("good.yaml")
                + ": spec.template.spec.terminationGracePeriodSeconds: 40 is shorter than route b's"
                + " cancelGrace (60s) plus 30s: the kubelet would kill terraform before it writes"
                + " its state. Set at least 90, or leave it out\n  routes[2].template: "
                + dir.resolve("missing.yaml")
                + ": no such file");
  }

  @Test
  void aManifestThatIsNotAJobIsRefused() throws Exception {
    Path f =
        write(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {selector: {}, template: {}}\n");
    assertThatThrownBy(() -> JobTemplates.parse(f, SER))
        .hasMessage(
            f + ": not a batch/v1 Job (it is apps/v1 Deployment); a template is a Job manifest");
    Path g = write("this: [is not, valid");
    assertThatThrownBy(() -> JobTemplates.parse(g, SER))
        .hasMessageStartingWith(g + ": not a Kubernetes manifest: ");
    assertThatThrownBy(() -> JobTemplates.parse(dir.resolve("missing.yaml"), SER))
        .isInstanceOf(ConfigException.class)
        .hasMessageEndingWith("missing.yaml: no such file");
  }
}
