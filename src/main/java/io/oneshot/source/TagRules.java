package io.oneshot.source;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Which route takes a tag set of waiting jobs: oneshot's own rule for {@code postgres} sources, and
 * Coder's for {@code coder} sources, so that a route serves exactly the jobs the provisioner key it
 * runs with would serve.
 */
final class TagRules {
  static final String SCOPE = "scope";
  static final String OWNER = "owner";
  static final String ORGANIZATION = "organization";

  private TagRules() {}

  /**
   * oneshot's rule (as {@code oneshot.enqueue()} binds builds): tagged jobs go to a route whose
   * tags contain all of theirs; untagged ones to a route that takes untagged builds.
   */
  static boolean oneshot(Map<String, String> routeTags, boolean untagged, Map<String, String> job) {
    return job.isEmpty() ? untagged : routeTags.entrySet().containsAll(job.entrySet());
  }

  /**
   * Coder's rule for a daemon started with a provisioner key whose tags are {@code routeTags}. A
   * daemon authenticated by a provisioner key is scoped to its organization ({@code coder
   * provisioner start} drops any scope tag: coder/coder enterprise/cli/provisionerdaemonstart.go),
   * and coderd completes its tags as {@code MutateTags} does (coder/coder
   * provisionersdk/provisionertags.go): scope organization, owner empty. A job matches when {@code
   * provisioner_tagset_contains(daemon, job)} holds (coder/coder coderd/database/dump.sql;
   * migration 000275_check_tags): a job whose tags are exactly {scope: organization, owner: ""} (an
   * untagged template) only on a daemon with exactly those tags, any other when the daemon's tags
   * contain all of the job's.
   */
  static boolean coder(Map<String, String> routeTags, Map<String, String> job) {
    Map<String, String> daemon = daemonTags(routeTags);
    if (job.equals(untaggedJob())) {
      return daemon.equals(job);
    }
    return daemon.entrySet().containsAll(job.entrySet());
  }

  /**
   * A daemon's tags as coderd completes them for an organization-scoped provisioner key: a tag
   * whose value is empty is dropped, as {@code MutateTags} does in current Coder (coder/coder
   * provisionersdk/provisionertags.go; releases before it kept them), so that a route tag {@code
   * region: ""} serves what a key with that tag serves: jobs without a region.
   */
  static Map<String, String> daemonTags(Map<String, String> keyTags) {
    Map<String, String> tags = new LinkedHashMap<>();
    keyTags.forEach(
        (k, v) -> {
          if (!v.isEmpty()) {
            tags.put(k, v);
          }
        });
    tags.put(SCOPE, ORGANIZATION);
    tags.put(OWNER, "");
    return tags;
  }

  private static Map<String, String> untaggedJob() {
    return Map.of(SCOPE, ORGANIZATION, OWNER, "");
  }
}
