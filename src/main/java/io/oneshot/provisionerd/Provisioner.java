package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildState;

/**
 * Runs one build inside provisionerd: {@code script} or {@code terraform}. A provisioner starts its
 * processes through {@link RunContext#run}, which carries out cancel, timeout and SIGTERM, and
 * writes its output through the context's log methods.
 */
interface Provisioner {

  Result run(RunContext ctx) throws InterruptedException;

  /**
   * The build's outcome as provisionerd reports it at {@code complete}; {@code state}, when not
   * null, is the workspace's terraform state as the build left it.
   */
  record Result(
      BuildState outcome, Integer exitCode, String error, JsonNode outputs, String state) {

    Result(BuildState outcome, Integer exitCode, String error) {
      this(outcome, exitCode, error, null, null);
    }

    Result withState(String s) {
      return new Result(outcome, exitCode, error, outputs, s);
    }

    Result withError(String e) {
      return new Result(outcome, exitCode, e, outputs, state);
    }
  }
}
