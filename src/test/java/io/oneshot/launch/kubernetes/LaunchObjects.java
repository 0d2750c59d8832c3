package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Secret;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.build.BuildToken;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.Attempt;
import java.util.ArrayList;
import java.util.List;

/** For tests outside this package: what the Kubernetes launcher would create for an attempt. */
public final class LaunchObjects {
  private LaunchObjects() {}

  /** The label the launcher puts on every Job and Secret it makes, and its value. */
  public static final String MANAGED_BY = JobFactory.MANAGED_BY;

  public static final String MANAGER = JobFactory.MANAGER;

  /**
   * The token Secret and the Job of attempt 1 of a build on each of the configuration's routes,
   * made from the routes' templates (read from {@code templateDir}) as the launcher makes them.
   */
  public static List<HasMetadata> forEveryRoute(
      OneshotConfig config, java.nio.file.Path templateDir) {
    JobFactory f = factory(config, templateDir);
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
      out.add(f.secret(a, null));
      out.add(f.job(a));
      build++;
    }
    return out;
  }

  /** The launcher's factory for the configuration's routes, templates read from templateDir. */
  private static JobFactory factory(OneshotConfig config, java.nio.file.Path templateDir) {
    OneshotConfig.Kubernetes k = config.launcher().kubernetes();
    return new JobFactory(
        JobTemplates.load(templateDir, config.routes(), new KubernetesSerialization()),
        k.namespace(),
        k.ttlSecondsAfterFinished());
  }

  /** The token Secret and the Job of one attempt. */
  public record Objects(Secret secret, Job job) {}

  /**
   * What the launcher would create for attempt 1 of builds {@code first} to {@code first + n - 1}
   * on the configuration's route {@code route}.
   */
  public static List<Objects> forBuilds(
      OneshotConfig config, java.nio.file.Path templateDir, String route, long first, int n) {
    JobFactory f = factory(config, templateDir);
    OneshotConfig.Route r = config.route(route).orElseThrow();
    List<Objects> out = new ArrayList<>(n);
    for (long b = first; b < first + n; b++) {
      Attempt a =
          new Attempt(
              b, 1, Attempt.nameOf(b, 1), r, BuildToken.generate(), config.api().publicUrl());
      out.add(new Objects(f.secret(a, null), f.job(a)));
    }
    return out;
  }

  /**
   * Whether the informers of {@code launcher} (a Kubernetes launcher, or one delegating to it) have
   * seen the Jobs of {@code n} launches.
   */
  public static boolean seenAll(io.oneshot.launch.Launcher launcher, int n) {
    while (launcher instanceof io.oneshot.testing.DelegatingLauncher d) {
      launcher = d.real();
    }
    return ((KubernetesLauncher) launcher).watch().jobs().size() >= n;
  }

  /**
   * The requests of oneshot's launch, made by a plain client with nothing around them: create the
   * Job, then the Secret owned by it.
   */
  public static void createJobThenOwnedSecret(KubernetesClient client, Objects o) {
    String ns = o.job().getMetadata().getNamespace();
    Job created = client.batch().v1().jobs().inNamespace(ns).resource(o.job()).create();
    Secret owned =
        new io.fabric8.kubernetes.api.model.SecretBuilder(o.secret())
            .editMetadata()
            .withOwnerReferences(JobFactory.ownedBy(created))
            .endMetadata()
            .build();
    client.secrets().inNamespace(ns).resource(owned).create();
  }

  /**
   * The requests of a launch as one would first write it, made by a plain client with nothing
   * around them: create the Secret, create the Job, make the Job own the Secret (three requests,
   * the launch oneshot made until 2026-11-26).
   */
  public static void createPlainly(KubernetesClient client, Objects o) {
    String ns = o.job().getMetadata().getNamespace();
    client.secrets().inNamespace(ns).resource(o.secret()).create();
    Job created = client.batch().v1().jobs().inNamespace(ns).resource(o.job()).create();
    String owner =
        client
            .getKubernetesSerialization()
            .asJson(
                java.util.Map.of(
                    "metadata",
                    java.util.Map.of("ownerReferences", List.of(JobFactory.ownedBy(created)))));
    client
        .secrets()
        .inNamespace(ns)
        .resource(o.secret())
        .patch(PatchContext.of(PatchType.JSON_MERGE), owner);
  }
}
