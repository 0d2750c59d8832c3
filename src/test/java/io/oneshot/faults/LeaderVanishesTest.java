package io.oneshot.faults;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.DispatcherProcess;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.TestServer;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A leader whose host vanishes (a node lost, a partition) sends nothing more: no FIN, no RST. Its
 * database session, and with it the leader lock, would stay for TCP's default two hours; the TCP
 * keepalives oneshot sets on that session make the server end it within seconds, and another
 * replica leads.
 *
 * <p>The leader runs in a network namespace of its own, joined to this one by a veth pair; its host
 * "vanishes" when the pair's link goes down, which drops every packet silently. PostgreSQL is an
 * embedded one listening on the pair's address (the machine's own listens on loopback only). Needs
 * root and {@code ip} (iproute2), as on the project's machines and CI.
 */
@Heavy
class LeaderVanishesTest {
  @TempDir Path tmp;
  private final List<DispatcherProcess> dispatchers = new ArrayList<>();
  private EmbeddedPostgres pg;
  private long stopped = -1;
  private String ns;
  private String hostLink;

  @AfterEach
  void tearDown() throws Exception {
    if (stopped > 0) {
      runQuietly("kill", "-CONT", Long.toString(stopped));
    }
    dispatchers.forEach(DispatcherProcess::kill);
    if (ns != null) {
      run("ip", "netns", "del", ns);
    }
    if (hostLink != null) {
      runQuietly("ip", "link", "del", hostLink);
    }
    if (pg != null) {
      pg.close();
    }
  }

  private static int run(String... cmd) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    int code = p.waitFor();
    if (code != 0) {
      throw new IllegalStateException(String.join(" ", cmd) + ": exit " + code + ": " + out);
    }
    return code;
  }

  private static void runQuietly(String... cmd) {
    try {
      new ProcessBuilder(cmd).redirectErrorStream(true).start().waitFor();
    } catch (IOException | InterruptedException e) {
      // best effort
    }
  }

  private static boolean canMakeNamespaces() {
    String name = "oneshot-probe-" + ProcessHandle.current().pid();
    try {
      run("ip", "netns", "add", name);
      run("ip", "netns", "del", name);
      return true;
    } catch (IOException | InterruptedException | IllegalStateException e) {
      return false;
    }
  }

  /** The session that holds the leader lock: its server process and its client's address. */
  private record LeaderLock(long pid, String address) {}

  /** The session that holds the leader lock, or null. */
  private LeaderLock leaderLock() {
    try (Connection c = pg.getPostgresDatabase().getConnection();
        Statement st = c.createStatement();
        ResultSet r =
            st.executeQuery(
                "SELECT l.pid, host(a.client_addr) FROM pg_locks l"
                    + " JOIN pg_stat_activity a ON a.pid = l.pid"
                    + " WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()"
                    + " AND a.application_name = 'oneshot-leader'")) {
      return r.next() ? new LeaderLock(r.getLong(1), r.getString(2)) : null;
    } catch (Exception e) {
      return null;
    }
  }

  /** The client address of the session that holds the leader lock, or null. */
  private String leaderAddress() {
    LeaderLock l = leaderLock();
    return l == null ? null : l.address();
  }

  private Path config(String name, String dbHost) throws IOException {
    Path config = tmp.resolve(name + ".yaml");
    Files.writeString(
        config,
        """
        database: {url: "postgresql://postgres@%s:%d/postgres", poolSize: 2}
        api: {listen: "127.0.0.1:0", publicUrl: "http://127.0.0.1:9", adminToken: "%s"}
        dispatch: {leaderInterval: 1s, pollInterval: 1s, rescueInterval: 1s}
        launcher: {kind: local, local: {runDir: "%s"}}
        routes: [{name: a}]
        """
            .formatted(dbHost, pg.getPort(), TestServer.ADMIN_TOKEN, tmp.resolve("runs-" + name)));
    return config;
  }

  /** The far replica in its namespace, leading; the near one on this host, following. */
  private record Replicas(
      DispatcherProcess far, DispatcherProcess near, String farIp, String farLink) {}

  private Replicas farLeading() throws Exception {
    Assumptions.assumeTrue(
        canMakeNamespaces(), "needs root and iproute2 to make a network namespace");
    int n = ThreadLocalRandom.current().nextInt(1, 250);
    ns = "oneshot-ka-" + ProcessHandle.current().pid();
    hostLink = "osk" + n + "h";
    String peerLink = "osk" + n + "p";
    String hostIp = "10.231." + n + ".1";
    String peerIp = "10.231." + n + ".2";
    run("ip", "netns", "add", ns);
    run("ip", "link", "add", hostLink, "type", "veth", "peer", "name", peerLink);
    run("ip", "link", "set", peerLink, "netns", ns);
    run("ip", "addr", "add", hostIp + "/30", "dev", hostLink);
    run("ip", "link", "set", hostLink, "up");
    run("ip", "netns", "exec", ns, "ip", "addr", "add", peerIp + "/30", "dev", peerLink);
    run("ip", "netns", "exec", ns, "ip", "link", "set", peerLink, "up");
    run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up");

    Path data = tmp.resolve("pg");
    pg =
        EmbeddedPostgres.builder()
            .setDataDirectory(data)
            .setCleanDataDirectory(true)
            .setServerConfig("listen_addresses", "*")
            .start();
    Files.writeString(
        data.resolve("pg_hba.conf"),
        "host all all " + peerIp + "/32 trust\n",
        java.nio.file.StandardOpenOption.APPEND);
    try (Connection c = pg.getPostgresDatabase().getConnection();
        Statement st = c.createStatement()) {
      st.execute("SELECT pg_reload_conf()");
    }

    DispatcherProcess far =
        new DispatcherProcess("far", config("far", hostIp), tmp, Map.of())
            .under(List.of("ip", "netns", "exec", ns))
            .start();
    dispatchers.add(far);
    await().atMost(2, TimeUnit.MINUTES).until(() -> peerIp.equals(leaderAddress()));
    DispatcherProcess near =
        new DispatcherProcess("near", config("near", "127.0.0.1"), tmp, Map.of()).start();
    dispatchers.add(near);
    await().atMost(1, TimeUnit.MINUTES).until(() -> near.ready() != null);
    assertThat(leaderAddress()).as("the far replica still leads").isEqualTo(peerIp);
    return new Replicas(far, near, peerIp, peerLink);
  }

  /** The far host vanishes: its packets go nowhere, and nothing tells the server so. */
  private void cut(Replicas r) throws Exception {
    run("ip", "netns", "exec", ns, "ip", "link", "set", r.farLink(), "down");
  }

  private void awaitNearLeads(Replicas r, long cutNanos) {
    // About 5 s with the settings; without them, TCP's 15 minutes or two hours.
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> "127.0.0.1".equals(leaderAddress()) && r.near().leads());
    System.out.printf(
        "a vanished leader was replaced %d ms after its link went down%n",
        (System.nanoTime() - cutNanos) / 1_000_000);
    assertThat(r.far().alive()).as("the far replica is still running, cut off").isTrue();
  }

  @Test
  void aLeaderWhoseHostVanishesIsReplacedWithinSecondsNotHours() throws Exception {
    Replicas r = farLeading();
    long cut = System.nanoTime();
    cut(r);
    // leaderInterval 1s: the server probes after 2 s idle, every 1 s, and gives up after 3.
    awaitNearLeads(r, cut);
  }

  /**
   * The server probes an idle session only while nothing it sent waits for an acknowledgement. Here
   * the host vanishes with the server's answer to the leader's check in flight, as it does when the
   * link goes in the few milliseconds before the client's delayed ACK: the lock session's backend
   * is stopped until the leader's next check has arrived, the link is cut, and the backend answers
   * into the void.
   */
  @Test
  void aLeaderThatVanishesWithAnAnswerInFlightIsReplacedWithinSecondsToo() throws Exception {
    Replicas r = farLeading();
    LeaderLock lock = leaderLock();
    assertThat(lock).as("a session holds the leader lock").isNotNull();
    long backend = lock.pid();
    stopped = backend;
    run("kill", "-STOP", Long.toString(backend));
    // The leader's next check (every second) reaches the server's socket and waits there.
    await()
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(10))
        .until(() -> socketOf(backend).received() > 0);
    long cut = System.nanoTime();
    cut(r);
    assertThat(socketOf(backend).state())
        .as("the leader had not given up on its check before its link went down")
        .isEqualTo("ESTAB");
    run("kill", "-CONT", Long.toString(backend));
    stopped = -1;
    await()
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(10))
        .alias("the server's answer waits for an acknowledgement that cannot come")
        .until(() -> socketOf(backend).unsent() > 0);
    awaitNearLeads(r, cut);
  }

  /** A TCP socket as {@code ss} shows it: its state and the bytes in its two queues. */
  private record Socket(String state, long received, long unsent) {}

  private static Socket socketOf(long pid) throws IOException, InterruptedException {
    Process p = new ProcessBuilder("ss", "-tnpH").redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    p.waitFor();
    for (String line : out.split("\n")) {
      if (line.contains("pid=" + pid + ",")) {
        String[] f = line.trim().split("\\s+");
        return new Socket(f[0], Long.parseLong(f[1]), Long.parseLong(f[2]));
      }
    }
    return new Socket("gone", 0, 0);
  }
}
