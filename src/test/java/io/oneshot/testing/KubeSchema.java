package io.oneshot.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Kubernetes objects checked against the OpenAPI schema of a current Kubernetes release: {@code
 * src/test/k8s-schema/validate.mjs} runs kubernetes-models' validators (generated from the
 * release's swagger.json) in Node.js. {@code scripts/test} installs them with {@code npm ci}.
 * Without Node.js or them, the tests that need them are skipped, unless {@code
 * ONESHOT_REQUIRE_K8S_SCHEMA=1} (CI), where they fail.
 */
public final class KubeSchema {
  private static final Path DIR = Path.of("src", "test", "k8s-schema");
  private static final ObjectMapper JSON = new ObjectMapper();

  private KubeSchema() {}

  /** One object's verdict; {@code schema} false: the release has no such kind (a custom one). */
  public record Verdict(
      String apiVersion, String kind, String name, boolean schema, List<String> errors) {
    @Override
    public String toString() {
      return kind + " " + name + ": " + (schema ? errors : "no schema");
    }
  }

  /** Validates each object (as JSON trees); one verdict per object, in order. */
  public static List<Verdict> validate(List<JsonNode> objects) {
    boolean installed = Files.isDirectory(DIR.resolve("node_modules/kubernetes-models"));
    Required.tool(
        installed,
        "ONESHOT_REQUIRE_K8S_SCHEMA",
        "the Kubernetes schema is not installed in "
            + DIR
            + " (scripts/test runs npm ci there when npm is found)",
        "schema checks are skipped");
    try {
      Path in = Files.createTempFile("oneshot-k8s-objects", ".json");
      try {
        JSON.writeValue(in.toFile(), objects);
        Process p =
            new ProcessBuilder("node", "validate.mjs", in.toAbsolutePath().toString())
                .directory(DIR.toFile())
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
          throw new AssertionError(
              "validate.mjs failed: " + new String(out, StandardCharsets.UTF_8));
        }
        List<Verdict> verdicts = new ArrayList<>();
        for (JsonNode v : JSON.readTree(out)) {
          List<String> errors = new ArrayList<>();
          v.path("errors").forEach(e -> errors.add(e.asText()));
          verdicts.add(
              new Verdict(
                  v.path("apiVersion").asText(),
                  v.path("kind").asText(),
                  v.path("name").asText(),
                  v.path("schema").asBoolean(),
                  errors));
        }
        if (verdicts.size() != objects.size()) {
          throw new AssertionError(
              verdicts.size() + " verdicts for " + objects.size() + " objects");
        }
        return verdicts;
      } finally {
        Files.deleteIfExists(in);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
