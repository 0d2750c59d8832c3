package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.marcnuri.helm.Helm;
import com.marcnuri.helm.TemplateCommand;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.KubernetesResource;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.UnaryOperator;

/** The Helm chart, rendered by Helm (helm-java) as release "oneshot" in namespace "oneshot". */
public final class Chart {
  /**
   * The chart: {@code charts/oneshot}, or the copy {@code -Doneshot.chart.dir} names
   * (scripts/mutate breaks a copy, never the chart itself).
   */
  public static final Path DIR = Path.of(System.getProperty("oneshot.chart.dir", "charts/oneshot"));

  private static final KubernetesSerialization K8S = new KubernetesSerialization();
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  private Chart() {}

  /** Renders the chart with the given values; every object is parsed as its kind. */
  public static List<HasMetadata> render(UnaryOperator<TemplateCommand> values) {
    return manifests(values).stream().map(Chart::parse).toList();
  }

  /** One rendering, read both ways: each object as Helm wrote it (a tree), and as its kind. */
  public record Rendered(List<JsonNode> documents, List<HasMetadata> objects) {}

  /** Renders the chart with the given values once, for both {@link Rendered} readings. */
  public static Rendered renderBoth(UnaryOperator<TemplateCommand> values) {
    List<String> m = manifests(values);
    return new Rendered(
        m.stream().map(Chart::tree).toList(), m.stream().map(Chart::parse).toList());
  }

  private static List<String> manifests(UnaryOperator<TemplateCommand> values) {
    String yaml =
        values.apply(new Helm(DIR).template().withName("oneshot").withNamespace("oneshot")).call();
    List<String> out = new ArrayList<>();
    for (String doc : yaml.split("(?m)^---\\s*$")) {
      if (doc.lines().allMatch(l -> l.isBlank() || l.startsWith("#"))) {
        continue;
      }
      out.add(doc);
    }
    return out;
  }

  /**
   * What the chart's Roles grant, as "group/resource verb" ("batch/jobs create"), in any of its
   * namespaces.
   */
  public static Set<String> roleAccess(List<HasMetadata> objs) {
    Set<String> out = new TreeSet<>();
    for (HasMetadata o : objs) {
      List<PolicyRule> rules =
          o instanceof Role role
              ? role.getRules()
              : o instanceof io.fabric8.kubernetes.api.model.rbac.ClusterRole cr
                  ? cr.getRules()
                  : null;
      if (rules != null) {
        for (PolicyRule rule : rules) {
          for (String group : rule.getApiGroups()) {
            for (String res : rule.getResources()) {
              for (String verb : rule.getVerbs()) {
                out.add(group + "/" + res + " " + verb);
              }
            }
          }
        }
      }
    }
    return out;
  }

  /**
   * Parses one manifest as its kind and checks that nothing in it is unknown to that kind's model
   * (a misspelt field would be dropped silently by the API server, or refused by it).
   */
  public static HasMetadata parse(String doc) {
    Object typed = K8S.unmarshal(doc, KubernetesResource.class);
    assertThat(typed).as(doc).isInstanceOf(HasMetadata.class);
    if (!(typed instanceof GenericKubernetesResource)) {
      JsonNode back = YAML.valueToTree(typed);
      assertThat(comparable(back)).as(doc).isEqualTo(comparable(tree(doc)));
    }
    return (HasMetadata) typed;
  }

  public static JsonNode tree(String yaml) {
    try {
      return YAML.readTree(yaml);
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  /** Without nulls and empty containers; scalars by their text (int-or-string, quantities). */
  private static JsonNode comparable(JsonNode n) {
    if (n.isObject()) {
      ObjectNode o = YAML.createObjectNode();
      n.properties()
          .forEach(
              e -> {
                JsonNode v = comparable(e.getValue());
                boolean empty = v.isNull() || (v.isContainerNode() && v.isEmpty());
                if (!empty) {
                  o.set(e.getKey(), v);
                }
              });
      return o;
    }
    if (n.isArray()) {
      ArrayNode a = YAML.createArrayNode();
      n.forEach(x -> a.add(comparable(x)));
      return a;
    }
    return n.isValueNode() && !n.isNull() ? YAML.getNodeFactory().textNode(n.asText()) : n;
  }
}
