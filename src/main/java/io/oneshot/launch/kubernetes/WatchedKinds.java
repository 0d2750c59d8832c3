package io.oneshot.launch.kubernetes;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import io.fabric8.kubernetes.api.model.ObjectMeta;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import java.io.IOException;

/**
 * What the informers decode of the Jobs and Pods they watch: metadata and status, which is all
 * {@link ClusterWatch} and its readers use, and of a pod's spec its node. A watch event carries the
 * whole object; fabric8 builds each event's object into the model, the Job's pod template with its
 * containers and environment included, and on a real API server the metadata's {@code
 * managedFields} too, a tree the size of the object itself. Decoded in full, the Jobs' events took
 * 9% of the CPU of a burst of launches against the echo API, outside the JIT and the collector
 * (async-profiler, 2026-11-28: the dispatcher and the echo server in one JVM), and 4% decoded so.
 *
 * <p>{@link #register} makes the client's serialization decode the watched kinds into these
 * subclasses wherever it reads an object by its {@code apiVersion} and {@code kind}: a watch
 * event's object, or a manifest read as a {@code KubernetesResource}. Typed reads ({@code
 * jobs().withName(...).get()}, an informer's list, {@code unmarshal(text, Job.class)}) still decode
 * the whole object, and so do the templates, which the launcher reads with a serialization of their
 * own ({@link KubernetesLauncher#create}). A cached object's spec is therefore null for a Job and
 * holds only {@code nodeName} for a Pod: whatever comes to read more of it from the caches must
 * decode it here first.
 */
final class WatchedKinds {
  private WatchedKinds() {}

  /** Decodes watched Jobs and Pods with {@code serialization} as {@link Job} and {@link Pod}. */
  static void register(KubernetesSerialization serialization) {
    serialization.registerKubernetesResource("batch/v1", "Job", Job.class);
    serialization.registerKubernetesResource("v1", "Pod", Pod.class);
  }

  /** A watched Job: its spec is skipped. */
  @JsonIgnoreProperties(
      value = {"spec"},
      allowGetters = true,
      ignoreUnknown = true)
  static final class Job extends io.fabric8.kubernetes.api.model.batch.v1.Job {
    @Override
    @JsonDeserialize(as = Meta.class)
    public void setMetadata(ObjectMeta metadata) {
      super.setMetadata(metadata);
    }
  }

  /** A watched Pod: of its spec, the node it runs on. */
  @JsonIgnoreProperties(ignoreUnknown = true)
  static final class Pod extends io.fabric8.kubernetes.api.model.Pod {
    @Override
    @JsonDeserialize(as = Meta.class)
    public void setMetadata(ObjectMeta metadata) {
      super.setMetadata(metadata);
    }

    @Override
    @JsonDeserialize(using = NodeOnly.class)
    public void setSpec(PodSpec spec) {
      super.setSpec(spec);
    }
  }

  /** A watched object's metadata without the server's record of who set which field. */
  @JsonIgnoreProperties(
      value = {"managedFields"},
      allowGetters = true,
      ignoreUnknown = true)
  static final class Meta extends ObjectMeta {}

  /** A pod's spec as far as {@link PodNotes} reads it: the node it was scheduled to. */
  static final class NodeOnly extends JsonDeserializer<PodSpec> {
    @Override
    public PodSpec deserialize(JsonParser p, DeserializationContext ctx) throws IOException {
      PodSpec spec = new PodSpec();
      String field =
          p.currentToken() == JsonToken.START_OBJECT ? p.nextFieldName() : p.currentName();
      for (; field != null; field = p.nextFieldName()) {
        JsonToken value = p.nextToken();
        if ("nodeName".equals(field) && value == JsonToken.VALUE_STRING) {
          spec.setNodeName(p.getText());
        } else {
          p.skipChildren();
        }
      }
      return spec;
    }
  }
}
