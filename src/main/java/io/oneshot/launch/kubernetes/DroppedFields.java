package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.batch.v1.Job;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Job fields the API server did not keep, each said once, as a WARN and in {@code /readyz}: a
 * server that does not know a field (too old, or a feature gate off) drops it silently.
 */
final class DroppedFields {
  private static final Logger log = LoggerFactory.getLogger(DroppedFields.class);

  private final List<String> warnings = new CopyOnWriteArrayList<>();
  private final Set<String> warned = ConcurrentHashMap.newKeySet();
  private volatile String serverVersion = "(version unknown)";

  /** The API server's version, named when it drops a field. */
  void serverVersion(String version) {
    serverVersion = version;
  }

  List<String> warnings() {
    return List.copyOf(warnings);
  }

  /**
   * Compares the Job the API server stored with the one sent: a server that does not know a field
   * (too old, or a feature gate off) drops it silently. Each dropped field is said once, as a WARN
   * and in {@code /readyz}. Builds stay safe without them: a second pod of an attempt is refused by
   * the runner binding; they only spare the cluster that second pod.
   */
  void check(Job sent, Job kept) {
    if (kept == null || kept.getSpec() == null) {
      return;
    }
    List<String> dropped = new ArrayList<>();
    if (sent.getSpec().getPodFailurePolicy() != null
        && kept.getSpec().getPodFailurePolicy() == null) {
      dropped.add("spec.podFailurePolicy");
    }
    if (sent.getSpec().getPodReplacementPolicy() != null
        && kept.getSpec().getPodReplacementPolicy() == null) {
      dropped.add("spec.podReplacementPolicy");
    }
    if (!Integer.valueOf(0).equals(kept.getSpec().getBackoffLimit())) {
      dropped.add("spec.backoffLimit: 0 (kept as " + kept.getSpec().getBackoffLimit() + ")");
    }
    for (String field : dropped) {
      if (warned.add(field)) {
        String w =
            "the Kubernetes API server "
                + serverVersion
                + " did not keep "
                + field
                + " of Job "
                + kept.getMetadata().getNamespace()
                + "/"
                + kept.getMetadata().getName()
                + ": it may start a second pod of an attempt; oneshot refuses that pod's"
                + " runner and deletes it, so builds still run once";
        warnings.add(w);
        log.warn("{}.", w);
      }
    }
  }
}
