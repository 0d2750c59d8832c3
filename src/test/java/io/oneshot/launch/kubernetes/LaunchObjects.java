package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.build.BuildToken;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import java.util.ArrayList;
import java.util.List;

/** For tests outside this package: what the Kubernetes launcher would create for an attempt. */
public final class LaunchObjects {
  private LaunchObjects() {}

  /**
   * The token Secret and the Job of attempt 1 of a build on each of the configuration's routes,
   * made from the routes' templates (read from {@code templateDir}) as the launcher makes them.
   */
  public static List<HasMetadata> forEveryRoute(
      OneshotConfig config, java.nio.file.Path templateDir) {
    KubernetesSerialization ser = new KubernetesSerialization();
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    JobFactory f =
        new JobFactory(
            JobTemplates.load(templateDir, config.routes(), ser),
            ser,
            k.namespace(),
            k.ttlSecondsAfterFinished());
    List<HasMetadata> out = new ArrayList<>();
    long build = 1;
    for (OneshotConfig.Route r : config.routes()) {
      Attempt a =
          new Attempt(
              build,
              1,
              Attempt.nameOf(build, 1),
              r,
              BuildToken.generate(),
              config.api().publicUrl());
      out.add(f.secret(a));
      out.add(f.job(a));
      build++;
    }
    return out;
  }
}
