package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * A build as the API and the CLI show it. {@code events} is the timeline, empty in listings.
 *
 * @param reason why the build is in its status: the reason of its last transition
 * @param stateRead the workspace state version a terraform or pulumi build started from (0: none)
 * @param stateWritten the workspace state version it wrote, if any
 * @param runner the provisionerd the current attempt is bound to (its first acquire), if any
 * @param rerunOf the build this one reruns, if it is a rerun (and the original is still kept)
 * @param what what it runs, in a line for a list: a script's command, terraform's transition,
 *     pulumi's operation and stack
 */
public record Build(
    long id,
    BuildState status,
    String route,
    Map<String, String> tags,
    String workspace,
    int priority,
    Long rerunOf,
    int attempt,
    String provisioner,
    String what,
    @com.fasterxml.jackson.annotation.JsonInclude(
            com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
        JsonNode pod,
    String reason,
    Instant createdAt,
    Instant claimedAt,
    Instant launchedAt,
    Instant startedAt,
    Instant heartbeatAt,
    Instant cancelRequestedAt,
    Instant finishedAt,
    Integer exitCode,
    String error,
    JsonNode outputs,
    @com.fasterxml.jackson.annotation.JsonInclude(
            com.fasterxml.jackson.annotation.JsonInclude.Include.NON_NULL)
        JsonNode usage,
    Launch launch,
    Integer stateRead,
    Integer stateWritten,
    BoundRunner runner,
    String submittedBy,
    List<BuildEvent> events) {

  /**
   * Where the current (or last) attempt runs; null before the first claim. For Kubernetes, {@code
   * name} is the Job and {@code pod} its pod once scheduled. {@code removedAt} and {@code
   * removedWhy} say when and why the rescuer deleted it (then {@code kubectl logs} no longer finds
   * it); null while it is kept.
   */
  public record Launch(
      String kind,
      String name,
      String namespace,
      String pod,
      java.time.Instant removedAt,
      String removedWhy) {}

  /**
   * The runner an attempt is bound to, as people see it: its {@link Runner#fingerprint()} (never
   * the id), where it runs, and since when.
   */
  public record BoundRunner(
      String runner, String pod, String podUid, String host, Long pid, Instant since) {
    public static BoundRunner of(Runner r, Instant since) {
      return new BoundRunner(r.fingerprint(), r.pod(), r.podUid(), r.host(), r.pid(), since);
    }
  }

  public Build withEvents(List<BuildEvent> timeline) {
    return with(reason, timeline);
  }

  /** The build with {@code why} as its reason (a pending build's, computed as it is read). */
  public Build withReason(String why) {
    return with(why, events);
  }

  private Build with(String why, List<BuildEvent> timeline) {
    return new Build(
        id,
        status,
        route,
        tags,
        workspace,
        priority,
        rerunOf,
        attempt,
        provisioner,
        what,
        pod,
        why,
        createdAt,
        claimedAt,
        launchedAt,
        startedAt,
        heartbeatAt,
        cancelRequestedAt,
        finishedAt,
        exitCode,
        error,
        outputs,
        usage,
        launch,
        stateRead,
        stateWritten,
        runner,
        submittedBy,
        timeline);
  }

  /**
   * A build's {@code what} from reads/build's column: a script's command without the shell that
   * runs it ({@code sh -c}), its first line, at most 120 characters; {@code terraform apply} or
   * {@code terraform destroy}; null for anything else.
   */
  static String what(String provisioner, String raw) {
    if (raw == null) {
      return null;
    }
    if ("terraform".equals(provisioner) || "pulumi".equals(provisioner)) {
      return provisioner + " " + raw;
    }
    String s = SHELL.matcher(raw).replaceFirst("");
    String line =
        s.lines().map(String::strip).filter(x -> !x.isEmpty()).findFirst().orElse("").strip();
    boolean more = line.length() > 120 || s.strip().length() > line.length();
    if (line.length() > 120) {
      line = line.substring(0, 119);
    }
    return more ? line + "…" : line;
  }

  /** {@code sh -c}, {@code /bin/bash -ec} and the like before a script's text. */
  private static final java.util.regex.Pattern SHELL =
      java.util.regex.Pattern.compile("^\\s*(/\\S*/)?(ba|da|z|k)?sh\\s+-[a-z]*c[a-z]*\\s+");
}
