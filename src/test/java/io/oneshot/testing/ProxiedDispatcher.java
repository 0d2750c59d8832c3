package io.oneshot.testing;

import io.oneshot.cli.Main;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.oneshot.server.OneshotServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * {@code oneshot dispatcher} as a test's separate process runs it behind a {@link TcpProxy} (an API
 * "Service" in front of several dispatchers on one machine): a runner call that the proxy forwards
 * is proven as the connection it forwards, from its client, by the dispatcher's own launcher (as
 * {@link DelegatingLauncher#proveThrough} does in one JVM), from what the proxies write to {@link
 * TcpProxy#FORWARDS}. Any other call is proven as it comes.
 */
public final class ProxiedDispatcher {
  private ProxiedDispatcher() {}

  public static void main(String[] args) {
    OneshotServer.embedding = real -> new Forwarded(real);
    Main.main(args);
  }

  private static final class Forwarded extends DelegatingLauncher {
    Forwarded(Launcher real) {
      super(real);
    }

    @Override
    public RunnerProof prove(RunnerCall call) {
      try (DirectoryStream<Path> maps = Files.newDirectoryStream(TcpProxy.FORWARDS, "*.map")) {
        for (Path map : maps) {
          for (String line : Files.readAllLines(map, StandardCharsets.UTF_8)) {
            String[] f = line.trim().split(" ");
            if (f.length == 3 && Integer.parseInt(f[0]) == call.remotePort()) {
              return super.prove(
                  new RunnerCall(
                      call.remoteHost(),
                      Integer.parseInt(f[1]),
                      Integer.parseInt(f[2]),
                      call.proof(),
                      call.stated()));
            }
          }
        }
      } catch (IOException | RuntimeException e) {
        // no proxy wrote here: the call came straight
      }
      return super.prove(call);
    }
  }
}
