package io.oneshot.cli;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.config.Quantities;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * A build's own pod settings on the command line (input.pod), each only as the build's route
 * allows: the server clamps a size over the route's maximum (and says so) or refuses it, as the
 * route says, and refuses anything else the route does not list (docs/pod-settings.md).
 */
final class PodOptions {
  @Option(
      names = "--cpu",
      paramLabel = "QUANTITY",
      description = "CPU the build's pod requests (500m, 2).")
  String cpu;

  @Option(
      names = "--cpu-limit",
      paramLabel = "QUANTITY",
      description = "CPU the build's pod may use at most.")
  String cpuLimit;

  @Option(
      names = "--memory",
      paramLabel = "QUANTITY",
      description =
          "Memory the build's pod requests and may use at most (512Mi, 2Gi): what a build killed"
              + " for memory asks for more of.")
  String memory;

  @Option(
      names = "--memory-request",
      paramLabel = "QUANTITY",
      description = "Memory the build's pod requests, when less than --memory.")
  String memoryRequest;

  @Option(
      names = "--ephemeral-storage",
      paramLabel = "QUANTITY",
      description = "Local disk the build's pod requests and may use at most (10Gi).")
  String ephemeralStorage;

  @Option(names = "--image", paramLabel = "IMAGE", description = "The build pod's image.")
  String image;

  @Option(
      names = "--node-selector",
      paramLabel = "KEY=VALUE",
      description = "A node label the build's pod must run on (repeatable).")
  Map<String, String> nodeSelector = new LinkedHashMap<>();

  @Option(
      names = "--toleration",
      paramLabel = "TAINT",
      description =
          "A taint the build's pod tolerates (repeatable): its key, with =VALUE and :EFFECT as"
              + " needed, like gpu:NoSchedule or spot=yes:NoExecute.")
  List<String> tolerations = new java.util.ArrayList<>();

  @Option(
      names = "--label",
      paramLabel = "KEY=VALUE",
      description = "A label on the build's pod (repeatable).")
  Map<String, String> labels = new LinkedHashMap<>();

  @Option(
      names = "--annotation",
      paramLabel = "KEY=VALUE",
      description = "An annotation on the build's pod (repeatable).")
  Map<String, String> annotations = new LinkedHashMap<>();

  @Option(
      names = "--service-account",
      paramLabel = "NAME",
      description = "The service account the build's pod runs as.")
  String serviceAccount;

  /** The settings given, as input.pod; null when none was. */
  ObjectNode pod() {
    ObjectNode pod = Json.MAPPER.createObjectNode();
    ObjectNode requests = Json.MAPPER.createObjectNode();
    ObjectNode limits = Json.MAPPER.createObjectNode();
    put(requests, "cpu", cpu, "--cpu");
    put(limits, "cpu", cpuLimit, "--cpu-limit");
    put(requests, "memory", memory, "--memory");
    put(limits, "memory", memory, "--memory");
    put(requests, "memory", memoryRequest, "--memory-request");
    put(requests, "ephemeral-storage", ephemeralStorage, "--ephemeral-storage");
    put(limits, "ephemeral-storage", ephemeralStorage, "--ephemeral-storage");
    if (!requests.isEmpty() || !limits.isEmpty()) {
      ObjectNode res = pod.putObject("resources");
      if (!requests.isEmpty()) {
        res.set("requests", requests);
      }
      if (!limits.isEmpty()) {
        res.set("limits", limits);
      }
    }
    if (image != null) {
      pod.put("image", image);
    }
    if (!nodeSelector.isEmpty()) {
      pod.set("nodeSelector", Json.MAPPER.valueToTree(nodeSelector));
    }
    if (!tolerations.isEmpty()) {
      var list = pod.putArray("tolerations");
      tolerations.forEach(t -> list.add(toleration(t)));
    }
    if (!labels.isEmpty()) {
      pod.set("labels", Json.MAPPER.valueToTree(labels));
    }
    if (!annotations.isEmpty()) {
      pod.set("annotations", Json.MAPPER.valueToTree(annotations));
    }
    if (serviceAccount != null) {
      pod.put("serviceAccount", serviceAccount);
    }
    return pod.isEmpty() ? null : pod;
  }

  private static void put(ObjectNode to, String resource, String quantity, String flag) {
    if (quantity == null) {
      return;
    }
    if (Quantities.parse(quantity) == null) {
      throw new CliException(
          Main.USAGE, flag + ": " + quantity + " is not a quantity like 500m, 2, 512Mi or 4Gi");
    }
    to.put(resource, quantity);
  }

  /** {@code KEY[=VALUE][:EFFECT]}: Equal with a value, Exists without. */
  static ObjectNode toleration(String spec) {
    ObjectNode t = Json.MAPPER.createObjectNode();
    String s = spec;
    int colon = s.lastIndexOf(':');
    if (colon >= 0) {
      String effect = s.substring(colon + 1);
      if (!List.of("NoSchedule", "PreferNoSchedule", "NoExecute").contains(effect)) {
        throw new CliException(
            Main.USAGE,
            "--toleration "
                + spec
                + ": the effect after ':' is NoSchedule, PreferNoSchedule or NoExecute");
      }
      s = s.substring(0, colon);
      t.put("effect", effect);
    }
    int eq = s.indexOf('=');
    String key = eq < 0 ? s : s.substring(0, eq);
    if (key.isEmpty()) {
      throw new CliException(
          Main.USAGE, "--toleration " + spec + ": a toleration names a taint's key");
    }
    t.put("key", key);
    if (eq < 0) {
      t.put("operator", "Exists");
    } else {
      t.put("operator", "Equal");
      t.put("value", s.substring(eq + 1));
    }
    return t;
  }
}
