package io.oneshot.launch;

import io.oneshot.build.Runner;

/**
 * A runner call as the dispatcher received it, for {@link Launcher#prove}: where its connection
 * comes from, the proof it carries ({@code Oneshot-Runner-Proof}: in a pod, its projected
 * ServiceAccount token), and the runner as it names itself (what it says proves nothing).
 *
 * @param remoteHost the connection's peer address
 * @param remotePort the connection's peer port
 * @param localPort the port the call arrived on
 * @param proof the proof header's value, or null
 * @param stated the runner as its headers name it
 */
public record RunnerCall(
    String remoteHost, int remotePort, int localPort, String proof, Runner stated) {
  @Override
  public String toString() {
    return "RunnerCall[" + remoteHost + ":" + remotePort + " -> " + localPort + "]";
  }
}
