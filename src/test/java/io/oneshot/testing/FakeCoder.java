package io.oneshot.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import io.oneshot.api.Json;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A test-only {@code coder} executable: {@code coder provisioner start} as oneshot's coder
 * provisioner uses it, against a {@link CoderDatabase}. Coder cannot run here; what the stand-in
 * does follows coder/coder:
 *
 * <ul>
 *   <li>flags {@code --name}, {@code --verbose} (debug lines, among them provisionerd's "acquired
 *       job"), {@code --prometheus-enable}, {@code --prometheus-address}, and the key in {@code
 *       CODER_PROVISIONER_DAEMON_KEY} (enterprise/cli/provisionerdaemonstart.go);
 *   <li>the daemon's tags are its key's, those with an empty value dropped, completed with scope
 *       organization and owner empty (provisionersdk/provisionertags.go, MutateTags), in the key's
 *       organization;
 *   <li>as it connects, its row in {@code provisioner_daemons} is upserted ({@code
 *       UpsertProvisionerDaemon}, coderd/database/queries/provisionerdaemons.sql: a new id, or the
 *       row of the same name and owner), and the row's id is the worker id its jobs get;
 *   <li>it takes jobs with {@code AcquireProvisionerJob} ({@link CoderDatabase#acquire}), one at a
 *       time, as provisionerd does; that query checks only {@code started_at IS NULL}, so a job
 *       canceled while queued (completed_at set by the cancel) is taken too: the runner's first
 *       update and its FailJob are both refused with "job already completed"
 *       (coderd/provisionerdserver/provisionerdserver.go, UpdateJob and FailJob), and the job stays
 *       as the cancel left it (provisionerd/runner/runner.go, do: the "Setting up" update first);
 *   <li>a job canceled while it runs: the runner's heartbeat learns it from UpdateJob's {@code
 *       Canceled} (runner.go, heartbeat), cancels the provision, and sends FailJob with the
 *       provision's error: the job ends {@code failed}, its canceled_at set;
 *   <li>it exports {@code coderd_provisionerd_jobs_current{provisioner="terraform"}} and {@code
 *       coderd_provisionerd_job_timings_seconds} (provisionerd/provisionerd.go, NewMetrics), each
 *       only once it has a series: the first from the first job on, the second from the first job's
 *       end; when its address cannot be bound, it logs "http server listen" and runs on without
 *       metrics (cli/server.go, ServeHandler: ListenAndServe in a goroutine whose error is only
 *       logged);
 *   <li>SIGTERM and SIGHUP: it finishes the job it holds, takes no other, and exits; SIGINT: it
 *       cancels the job it holds (FailJob with the provision's error) and exits
 *       (provisionerdaemonstart.go: StopSignalsNoInterrupt wait for jobs, InterruptSignals do not);
 *   <li>it exits 0 whatever became of its job (provisionerdaemonstart.go: the handler returns nil
 *       after a shutdown by signal): the job's outcome is in Coder's tables alone.
 * </ul>
 *
 * <p>Where Coder talks to coderd over HTTP at {@code CODER_URL}, the stand-in talks to the database
 * directly: its {@code CODER_URL} is that database's JDBC URL. A job "applies" for the {@code
 * apply_ms} of its input, and fails when its input says {@code fail} (the provision's error).
 */
public final class FakeCoder {
  private static final AtomicLong current = new AtomicLong();
  private static final AtomicLong finished = new AtomicLong();
  private static volatile boolean stopping;
  private static volatile boolean interrupted;
  private static volatile boolean quiet;
  private static volatile boolean started;
  private static final CountDownLatch done = new CountDownLatch(1);

  private FakeCoder() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 2 || !args[0].equals("provisioner") || !args[1].equals("start")) {
      System.err.println(
          "fake coder: only `coder provisioner start` is here, got " + List.of(args));
      System.exit(2);
    }
    String name = null;
    String address = "127.0.0.1:2112";
    boolean prometheus = false;
    boolean verbose = false;
    for (int i = 2; i < args.length; i++) {
      switch (args[i]) {
        case "--name" -> name = args[++i];
        case "--prometheus-enable" -> prometheus = true;
        case "--verbose" -> verbose = true;
        case "--prometheus-address" -> address = args[++i];
        default -> {
          System.err.println("fake coder: unknown flag " + args[i]);
          System.exit(2);
        }
      }
    }
    String url = System.getenv("CODER_URL");
    String key = System.getenv("CODER_PROVISIONER_DAEMON_KEY");
    if (url == null || key == null) {
      System.err.println("fake coder: CODER_URL and CODER_PROVISIONER_DAEMON_KEY are required");
      System.exit(1);
    }
    try (Connection c = DriverManager.getConnection(url)) {
      UUID org;
      UUID keyId;
      Map<String, String> tags = new TreeMap<>();
      try (PreparedStatement st =
          c.prepareStatement(
              "SELECT organization_id, tags::text, id FROM provisioner_keys WHERE hashed_secret ="
                  + " sha256(convert_to(?, 'UTF8'))")) {
        st.setString(1, key);
        try (ResultSet rs = st.executeQuery()) {
          if (!rs.next()) {
            System.err.println("unable to get provisioner key details");
            System.exit(1);
          }
          org = (UUID) rs.getObject(1);
          keyId = (UUID) rs.getObject(3);
          Json.tree(rs.getString(2))
              .properties()
              .forEach(
                  e -> {
                    if (!e.getValue().asText().isEmpty()) {
                      tags.put(e.getKey(), e.getValue().asText());
                    }
                  });
        }
      }
      tags.put("scope", "organization");
      tags.put("owner", "");
      UUID worker = upsertDaemon(c, name, org, keyId, tags);
      // A test knob: the metrics port is written to this file, and bound once "<file>.go" exists
      // (another process may take the port meanwhile).
      String portFile = System.getenv("FAKE_CODER_PORT_FILE");
      if (portFile != null) {
        Files.writeString(Path.of(portFile), address.substring(address.lastIndexOf(':') + 1));
        while (!Files.exists(Path.of(portFile + ".go")) && !stopping) {
          Thread.sleep(20);
        }
      }
      if (prometheus) {
        try {
          serveMetrics(address);
        } catch (IOException e) {
          System.out.println(
              "[erro] http server listen  name=prometheus error=\"listen tcp "
                  + address
                  + ": bind: address already in use\"");
        }
      }
      onSignal("TERM", () -> stopping = true);
      onSignal("HUP", () -> stopping = true);
      onSignal(
          "INT",
          () -> {
            interrupted = true;
            stopping = true;
          });
      System.out.println("starting provisioner daemon name=" + name + " tags=" + Json.write(tags));
      // A test knob: no job is taken before this file exists (a daemon that is slow to start).
      // A test knob: when this file exists at start, the daemon gives no sign of a job (no
      // "acquired job" line, its gauges stay 0), so that its provisionerd never reports one.
      String quietFile = System.getenv("FAKE_CODER_QUIET");
      quiet = quietFile != null && Files.exists(Path.of(quietFile));
      String gate = System.getenv("FAKE_CODER_GATE");
      while (gate != null && !Files.exists(Path.of(gate)) && !stopping) {
        Thread.sleep(20);
      }
      while (!stopping) {
        UUID job = acquire(c, org, tags, worker);
        if (job == null) {
          Thread.sleep(50);
          continue;
        }
        run(c, name, job, verbose);
      }
      System.out.println(
          interrupted
              ? "Interrupt caught, gracefully exiting."
              : "Stop caught, waiting for provisioner jobs to complete and gracefully exiting.");
    }
    done.countDown();
    System.exit(0);
  }

  private static UUID acquire(Connection c, UUID org, Map<String, String> tags, UUID worker)
      throws SQLException {
    try (PreparedStatement st = c.prepareStatement(CoderDatabase.ACQUIRE)) {
      st.setObject(1, worker);
      st.setObject(2, org);
      st.setString(3, Json.write(tags));
      try (ResultSet rs = st.executeQuery()) {
        return rs.next() ? (UUID) rs.getObject(1) : null;
      }
    }
  }

  /**
   * {@code UpsertProvisionerDaemon} (coderd/database/queries/provisionerdaemons.sql): a new row, or
   * the one of the same name and owner; returns its id, the worker id of the jobs it takes.
   */
  private static UUID upsertDaemon(
      Connection c, String name, UUID org, UUID keyId, Map<String, String> tags)
      throws SQLException {
    try (PreparedStatement st =
        c.prepareStatement(
            "INSERT INTO provisioner_daemons (id, created_at, name, provisioners, tags,"
                + " last_seen_at, version, organization_id, api_version, key_id) VALUES"
                + " (gen_random_uuid(), now(), ?, '{terraform}', ?::jsonb, now(), 'v2-stand-in',"
                + " ?, '1.0', ?) ON CONFLICT (name, lower(COALESCE(tags ->> 'owner', ''::text)))"
                + " DO UPDATE SET tags = EXCLUDED.tags, last_seen_at = EXCLUDED.last_seen_at,"
                + " organization_id = EXCLUDED.organization_id WHERE provisioner_daemons.tags <@"
                + " EXCLUDED.tags RETURNING id")) {
      st.setString(1, name);
      st.setString(2, Json.write(tags));
      st.setObject(3, org);
      st.setObject(4, keyId);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        return (UUID) rs.getObject(1);
      }
    }
  }

  private static void run(Connection c, String name, UUID job, boolean verbose) throws Exception {
    started = true;
    current.set(1);
    if (verbose && !quiet) {
      // provisionerd logs this at debug level (provisionerd.go, acquireAndRunOne).
      System.out.println("[debu] provisionerd: acquired job  job_id=" + job);
    }
    JsonNode input = null;
    boolean completed = false;
    try (PreparedStatement st =
        c.prepareStatement(
            "SELECT input::text, completed_at IS NOT NULL FROM provisioner_jobs WHERE id = ?")) {
      st.setObject(1, job);
      try (ResultSet rs = st.executeQuery()) {
        rs.next();
        input = Json.tree(rs.getString(1));
        completed = rs.getBoolean(2);
      }
    }
    if (completed) {
      // Canceled while queued: the runner's first update and its FailJob are refused, and the job
      // stays as the cancel left it (provisionerdserver.go UpdateJob, FailJob; runner.go, Run).
      System.out.println(
          "[erro] provisionerd.runner: send FailJob  job_id="
              + job
              + " error=\"job already completed\"");
      finished.incrementAndGet();
      current.set(0);
      return;
    }
    String error = null;
    long until = System.currentTimeMillis() + input.path("apply_ms").asLong(200);
    System.out.println("terraform apply");
    boolean canceled = false;
    while (System.currentTimeMillis() < until && !interrupted && !canceled) {
      Thread.sleep(20);
      // The runner's heartbeat: UpdateJob answers whether the job was canceled (runner.go).
      try (PreparedStatement st =
          c.prepareStatement("SELECT canceled_at IS NOT NULL FROM provisioner_jobs WHERE id = ?")) {
        st.setObject(1, job);
        try (ResultSet rs = st.executeQuery()) {
          rs.next();
          canceled = rs.getBoolean(1);
        }
      }
    }
    if (interrupted || canceled) {
      System.out.println("attempting graceful cancelation");
      error = "terraform apply: context canceled";
    } else if (input.path("fail").asBoolean(false)) {
      error = "terraform apply: exit status 1: Error: creating instance: quota exceeded";
      System.out.println(error);
    } else {
      System.out.println("Apply complete! Resources: 1 added, 0 changed, 0 destroyed.");
    }
    // FailJob or CompleteJob (provisionerdserver.go): completed_at, and the error if it failed.
    try (PreparedStatement st =
        c.prepareStatement(
            "UPDATE provisioner_jobs SET completed_at = clock_timestamp(), updated_at ="
                + " clock_timestamp(), error = ? WHERE id = ? AND completed_at IS NULL")) {
      st.setString(1, error);
      st.setObject(2, job);
      st.executeUpdate();
    }
    finished.incrementAndGet();
    current.set(0);
  }

  private static void serveMetrics(String address) throws IOException {
    int colon = address.lastIndexOf(':');
    HttpServer server =
        HttpServer.create(
            new InetSocketAddress(
                address.substring(0, colon), Integer.parseInt(address.substring(colon + 1))),
            0);
    server.createContext(
        "/metrics",
        x -> {
          // A vector's series exists once a label value was used, and a registry leaves out a
          // family with no series (client_golang): jobs_current appears with the first job
          // (provisionerd.go, JobsCurrent.WithLabelValues as a runner starts), the timings with
          // the first job that ended.
          StringBuilder m = new StringBuilder();
          if (started && !quiet) {
            m.append("# TYPE coderd_provisionerd_jobs_current gauge\n")
                .append("coderd_provisionerd_jobs_current{provisioner=\"terraform\"} ")
                .append(current.get())
                .append("\n");
          }
          m.append("# TYPE coderd_provisionerd_num_daemons gauge\n")
              .append("coderd_provisionerd_num_daemons 1\n");
          if (finished.get() > 0 && !quiet) {
            m.append("# TYPE coderd_provisionerd_job_timings_seconds histogram\n")
                .append(
                    "coderd_provisionerd_job_timings_seconds_count{provisioner=\"terraform\",status=\"success\"} ")
                .append(finished.get())
                .append("\n");
          }
          byte[] body = m.toString().getBytes(StandardCharsets.UTF_8);
          x.sendResponseHeaders(200, body.length);
          try (OutputStream o = x.getResponseBody()) {
            o.write(body);
          }
        });
    server.setExecutor(null);
    server.start();
  }

  /** The stand-in tells SIGTERM from SIGINT: {@link io.oneshot.process.Signals#handle}. */
  private static void onSignal(String name, Runnable r) {
    if (io.oneshot.process.Signals.handle(name, r) == null) {
      throw new IllegalStateException("cannot handle SIG" + name);
    }
  }

  /** Writes a {@code coder} executable into {@code dir} that runs this class; returns its path. */
  public static Path install(Path dir) throws IOException {
    Files.createDirectories(dir);
    Path bin = dir.resolve("coder");
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx64m"));
    // The JDK's own class data sharing only: a script run by processes this JVM does not start
    // cannot put a writer's archive in place after its exit (ChildJvm.sharedArchive), and JVMs
    // that each write one in place at exit crash the ones mapping it meanwhile.
    cmd.add("-Xshare:auto");
    // Names where it was installed, so that a test can find the daemons it started and stop those
    // whose provisionerd was killed before it could (their command line holds this path).
    cmd.add("-Doneshot.fakecoder=" + bin.toAbsolutePath());
    cmd.add("-cp");
    cmd.add(String.join(java.io.File.pathSeparator, ChildJvm.classPath()));
    cmd.add(FakeCoder.class.getName());
    return ChildJvm.execScript(bin, cmd);
  }
}
