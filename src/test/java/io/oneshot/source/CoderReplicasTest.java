package io.oneshot.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.CoderDatabase;
import io.oneshot.testing.DispatcherProcess;
import io.oneshot.testing.FakeCoder;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TestDatabase;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two dispatcher processes with a coder source, behind one API address, while Coder posts jobs in
 * bursts and the leader is SIGKILLed mid-burst and started again: every job gets exactly one build,
 * and every build's daemon runs exactly one job.
 */
@Heavy
class CoderReplicasTest {
  private final CoderDatabase coder = new CoderDatabase();
  private final List<DispatcherProcess> dispatchers = new ArrayList<>();
  private TcpProxy service;
  @TempDir Path tmp;

  @AfterEach
  void tearDown() {
    dispatchers.forEach(DispatcherProcess::kill);
    // The attempts (their command lines name the runs directory) and the fake daemons they started
    // (theirs name the fake coder's path, under tmp too): a provisionerd killed with its dispatcher
    // leaves its daemon behind, which would poll Coder's database through the tests after this one.
    String mine = tmp.toString();
    ProcessHandle.allProcesses()
        .filter(p -> p.info().commandLine().map(c -> c.contains(mine)).orElse(false))
        .forEach(ProcessHandle::destroyForcibly);
    if (service != null) {
      service.close();
    }
  }

  private DispatcherProcess leader() {
    return dispatchers.stream().filter(DispatcherProcess::leads).findFirst().orElse(null);
  }

  @Test
  void aLeaderKilledMidBurstAndItsStandbyLaunchOneBuildPerJob() throws Exception {
    Sql.reset();
    UUID org = coder.organization("acme");
    coder.applyMs = CoderDatabase.SHORT_APPLY_MS;
    Map<String, String> env =
        Map.of(
            "CODER_URL", coder.jdbcUrl(),
            "ONESHOT_CODER_BIN", FakeCoder.install(tmp.resolve("bin")).toString(),
            "CODER_PROVISIONER_DAEMON_KEY_CODER_A",
                coder.provisionerKey(org, "key-a", Map.of("env", "a")));
    // Each replica picks its port at every start; the "Service" follows what they report.
    service = DispatcherProcess.service(dispatchers);
    Path runs = Files.createDirectories(tmp.resolve("runs"));
    // The route runs 6 at once, and builds queue behind them: each build is two JVMs here
    // (provisionerd and the fake coder daemon), and forty starting at once on two cores starve the
    // dispatchers for longer than a lease, which is a test of the machine, not of this.
    // The dispatchers' logs outlive the test: a race seen once in many runs can be read afterwards.
    Path logs = io.oneshot.testing.Evidence.dir(getClass());
    for (int i = 0; i < 2; i++) {
      Path config = tmp.resolve("oneshot-" + i + ".yaml");
      Files.writeString(
          config,
          """
          database: {url: "%s", poolSize: 4}
          api: {listen: "127.0.0.1:0", publicUrl: "http://127.0.0.1:%d", adminToken: "%s"}
          dispatch: {pollInterval: 500ms, rescueInterval: 500ms, heartbeatInterval: 300ms, leaderInterval: 300ms}
          launcher:
            kind: local
            local:
              runDir: "%s"
              passEnv: [CODER_URL, ONESHOT_CODER_BIN]
              isolation: none
          routes:
            - {name: coder-a, tags: {env: a}, maxConcurrent: 6, hangTimeout: 30s,
               passEnv: [CODER_PROVISIONER_DAEMON_KEY_CODER_A]}
          sources:
            - name: coder
              kind: coder
              databaseUrl: "%s"
              pollInterval: 1s
              idleTimeout: 30s
              routes: [{route: coder-a, organization: acme}]
          """
              .formatted(
                  TestDatabase.url(), service.port(), TestServer.ADMIN_TOKEN, runs, coder.url));
      dispatchers.add(new DispatcherProcess("dispatcher-" + i, config, logs, env).start());
    }
    await().atMost(Duration.ofSeconds(60)).until(() -> leader() != null);

    Map<String, String> tags = CoderDatabase.jobTags(Map.of("env", "a"));
    for (int burst = 0; burst < 5; burst++) {
      coder.post(org, tags, 4);
      if (burst == 1) {
        // The leader dies as the burst comes in; its standby takes over, and it comes back.
        await()
            .atMost(Duration.ofSeconds(30))
            .until(() -> Sql.count("SELECT count(*) FROM oneshot.builds") >= 5);
        DispatcherProcess l = leader();
        l.kill();
        l.start();
      }
    }
    await()
        .atMost(Duration.ofMinutes(4))
        .until(
            () ->
                coder.aDaemonTookTwoJobs()
                    || coder.count("completed_at IS NOT NULL") == 20
                        && Sql.count(
                                "SELECT count(*) FROM oneshot.builds WHERE status IN ('pending',"
                                    + " 'launching', 'running')")
                            == 0);
    assertThat(coder.count("completed_at IS NOT NULL AND error IS NULL")).isEqualTo(20);
    List<Map<String, Object>> ran = coder.taken();
    assertThat(ran).hasSize(20);
    assertThat(ran.stream().map(r -> r.get("job")).distinct()).hasSize(20);
    assertThat(ran.stream().map(r -> r.get("daemon")).distinct()).hasSize(20);
    // One build per job: none launched twice over for the same waiting jobs.
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(20);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'"))
        .isEqualTo(20);
  }
}
