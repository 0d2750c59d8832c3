package io.oneshot.api;

import io.oneshot.build.Runner;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * How a runner names itself on every runner call: {@code Oneshot-Runner-Id} (required: a random id
 * per provisionerd process) and, to help a person find it, {@code Oneshot-Runner-Pod} and {@code
 * Oneshot-Runner-Pod-Uid} (in a pod, from the downward API), {@code Oneshot-Runner-Host} and {@code
 * Oneshot-Runner-Pid}. Headers rather than body fields, so that every call carries them alike.
 */
public final class RunnerHeaders {
  public static final String ID = "Oneshot-Runner-Id";
  public static final String POD = "Oneshot-Runner-Pod";
  public static final String POD_UID = "Oneshot-Runner-Pod-Uid";
  public static final String HOST = "Oneshot-Runner-Host";
  public static final String PID = "Oneshot-Runner-Pid";

  /**
   * What proves who the runner is, where the launcher's platform gives it one: in a pod, the pod's
   * projected ServiceAccount token for oneshot's audience. The dispatcher keeps only its hash.
   */
  public static final String PROOF = "Oneshot-Runner-Proof";

  /**
   * A runner's session: the secret the API answers a proven call with, which the runner sends on
   * its later calls instead of being proven again (it lives in provisionerd's memory alone).
   */
  public static final String SESSION = "Oneshot-Runner-Session";

  /** A pod name, pod UID or host name: what Kubernetes and DNS allow, and a little more. */
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._:-]{1,253}");

  private RunnerHeaders() {}

  /** The headers that name {@code runner}. */
  public static Map<String, String> of(Runner runner) {
    Map<String, String> h = new LinkedHashMap<>();
    h.put(ID, runner.id());
    if (runner.pod() != null) {
      h.put(POD, runner.pod());
    }
    if (runner.podUid() != null) {
      h.put(POD_UID, runner.podUid());
    }
    if (runner.host() != null) {
      h.put(HOST, runner.host());
    }
    if (runner.pid() != null) {
      h.put(PID, Long.toString(runner.pid()));
    }
    return h;
  }

  /** Reads the runner from a request's headers; a missing or malformed one is a 400. */
  static Runner parse(Function<String, String> header) {
    String id = header.apply(ID);
    if (id == null || id.isBlank()) {
      throw new ApiError(
          400,
          ID + ": required: a runner call names its runner",
          "provisionerd sends a random id per process; upgrade provisionerd to the dispatcher's"
              + " version",
          ID);
    }
    if (!Runner.ID.matcher(id).matches()) {
      throw ApiError.badRequest(ID, "must be 8 to 128 letters, digits, '.', '_' or '-'");
    }
    Long pid = null;
    String p = header.apply(PID);
    if (p != null) {
      try {
        pid = Long.parseLong(p.strip());
      } catch (NumberFormatException e) {
        throw ApiError.badRequest(PID, "must be a process id");
      }
    }
    return new Runner(id, name(header, POD), name(header, POD_UID), name(header, HOST), pid);
  }

  private static String name(Function<String, String> header, String field) {
    String v = header.apply(field);
    if (v == null || v.isEmpty()) {
      return null;
    }
    if (!NAME.matcher(v).matches()) {
      throw ApiError.badRequest(field, "must be 1 to 253 letters, digits, '.', '_', ':' or '-'");
    }
    return v;
  }
}
