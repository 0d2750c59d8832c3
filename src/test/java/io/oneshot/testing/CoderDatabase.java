package io.oneshot.testing;

import io.oneshot.api.Json;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

/**
 * A database shaped like Coder's, as far as oneshot and a provisioner daemon rely on it, on a fresh
 * database of the test server. Coder cannot run here; each part follows coder/coder:
 *
 * <ul>
 *   <li>the tables and columns: {@code organizations}, {@code provisioner_jobs} and the {@code
 *       provisioner_type} enum in coderd/database/dump.sql (only the columns the acquire and status
 *       logic read, plus those NOT NULL without a default, given values);
 *   <li>{@code job_status}, generated as in the migration that added it;
 *   <li>{@code provisioner_tagset_contains} as in coderd/database/migrations/000275_check_tags;
 *   <li>{@link #post}: coderd inserts the job, then publishes {@code provisioner_job_posted} with
 *       {organization_id, type, tags} (coderd/database/provisionerjobs/provisionerjobs.go, {@code
 *       PostJob}; coderd/database/pubsub/pubsub.go, {@code Publish}: {@code select
 *       pg_notify(<event>, $1)});
 *   <li>{@link #acquire}: {@code AcquireProvisionerJob} of
 *       coderd/database/queries/provisionerjobs.sql, word for word in its conditions and order;
 *   <li>{@link #cancel}: coderd/workspacebuilds.go {@code patchCancelWorkspaceBuild}: canceled_at
 *       set, and completed_at too when no worker holds the job;
 *   <li>{@code provisioner_daemons} as in dump.sql, with the unique (name, owner) that {@code
 *       UpsertProvisionerDaemon} (coderd/database/queries/provisionerdaemons.sql) conflicts on: a
 *       daemon's row, upserted as it connects, and {@code provisioner_jobs.worker_id} its id, are
 *       Coder's own record of which daemon took which job ({@link #taken}).
 * </ul>
 */
public final class CoderDatabase {
  /** The prebuilds system user: its jobs come after humans' (provisionerjobs.sql). */
  public static final UUID PREBUILDS_USER = UUID.fromString("c42fdf75-3097-471c-8c33-fb52454d81c0");

  public final String url;
  private final String jdbc;

  public CoderDatabase() {
    url = TestDatabase.fresh();
    jdbc = TestDatabase.jdbcUrl(url);
    exec(
        """
        CREATE TYPE provisioner_type AS ENUM ('echo', 'terraform');
        CREATE TYPE provisioner_job_type AS ENUM (
          'template_version_import', 'workspace_build', 'template_version_dry_run');
        CREATE TYPE provisioner_job_status AS ENUM (
          'pending', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'unknown');
        CREATE DOMAIN tagset AS jsonb;
        CREATE FUNCTION provisioner_tagset_contains(provisioner_tags tagset, job_tags tagset)
        RETURNS boolean AS $$
        BEGIN
          RETURN CASE
            WHEN job_tags::jsonb = '{"scope": "organization", "owner": ""}'::jsonb
              THEN job_tags::jsonb = provisioner_tags::jsonb
            ELSE job_tags::jsonb <@ provisioner_tags::jsonb
          END;
        END;
        $$ LANGUAGE plpgsql;
        CREATE TABLE organizations (
          id uuid PRIMARY KEY,
          name text NOT NULL UNIQUE
        );
        CREATE TABLE provisioner_daemons (
          id uuid PRIMARY KEY,
          created_at timestamptz NOT NULL,
          name varchar(64) NOT NULL,
          provisioners provisioner_type[] NOT NULL,
          replica_id uuid,
          tags jsonb NOT NULL DEFAULT '{}'::jsonb,
          last_seen_at timestamptz,
          version text NOT NULL DEFAULT '',
          api_version text NOT NULL DEFAULT '1.0',
          organization_id uuid NOT NULL,
          key_id uuid NOT NULL
        );
        CREATE UNIQUE INDEX idx_provisioner_daemons_org_name_owner_key
          ON provisioner_daemons (name, lower(COALESCE(tags ->> 'owner', '')));
        CREATE TABLE provisioner_keys (
          id uuid PRIMARY KEY,
          created_at timestamptz NOT NULL,
          organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
          name varchar(64) NOT NULL,
          hashed_secret bytea NOT NULL,
          tags jsonb NOT NULL
        );
        CREATE TABLE provisioner_jobs (
          id uuid PRIMARY KEY,
          created_at timestamptz NOT NULL,
          updated_at timestamptz NOT NULL,
          started_at timestamptz,
          canceled_at timestamptz,
          completed_at timestamptz,
          error text,
          organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
          initiator_id uuid NOT NULL,
          provisioner provisioner_type NOT NULL,
          type provisioner_job_type NOT NULL,
          input jsonb NOT NULL,
          worker_id uuid,
          tags jsonb NOT NULL DEFAULT '{"scope": "organization"}'::jsonb,
          job_status provisioner_job_status NOT NULL GENERATED ALWAYS AS (
            CASE
              WHEN completed_at IS NOT NULL THEN
                CASE
                  WHEN error != '' THEN 'failed'::provisioner_job_status
                  WHEN canceled_at IS NOT NULL THEN 'canceled'::provisioner_job_status
                  ELSE 'succeeded'::provisioner_job_status
                END
              ELSE
                CASE
                  WHEN error != '' THEN 'failed'::provisioner_job_status
                  WHEN canceled_at IS NOT NULL THEN 'canceling'::provisioner_job_status
                  WHEN started_at IS NULL THEN 'pending'::provisioner_job_status
                  ELSE 'running'::provisioner_job_status
                END
            END) STORED
        );
        CREATE INDEX provisioner_jobs_started_at_idx ON provisioner_jobs (started_at)
          WHERE started_at IS NULL;
        CREATE INDEX provisioner_jobs_worker_id_organization_id_completed_at_idx
          ON provisioner_jobs (worker_id, organization_id, completed_at DESC);
        """);
  }

  /** Adds an organization; returns its id. */
  public UUID organization(String name) {
    UUID id = UUID.randomUUID();
    exec("INSERT INTO organizations (id, name) VALUES ('" + id + "', '" + name + "')");
    return id;
  }

  /**
   * Adds a provisioner key of {@code org} with {@code tags}; returns the key as {@code coder
   * provisioner start --key} takes it. The stand-in daemon ({@link FakeCoder}) finds the key by
   * this secret's hash, as coderd does; the key's format is the stand-in's own.
   */
  public String provisionerKey(UUID org, String name, Map<String, String> tags) {
    String secret = name + "-" + UUID.randomUUID();
    try (Connection c = DriverManager.getConnection(jdbc);
        var st =
            c.prepareStatement(
                "INSERT INTO provisioner_keys (id, created_at, organization_id, name,"
                    + " hashed_secret, tags) VALUES (?, now(), ?, ?, sha256(convert_to(?, 'UTF8')),"
                    + " ?::jsonb)")) {
      st.setObject(1, UUID.randomUUID());
      st.setObject(2, org);
      st.setString(3, name);
      st.setString(4, secret);
      st.setString(5, Json.write(tags));
      st.executeUpdate();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return secret;
  }

  /** The JDBC URL of this database (for the stand-in daemon). */
  public String jdbcUrl() {
    return jdbc;
  }

  /** The tags of a job from a template with {@code extra} tags, organization-scoped. */
  public static Map<String, String> jobTags(Map<String, String> extra) {
    Map<String, String> t = new TreeMap<>(extra);
    t.put("scope", "organization");
    t.put("owner", "");
    return t;
  }

  /** Queues {@code n} workspace builds in {@code org} with {@code tags}, as coderd does. */
  public List<UUID> post(UUID org, Map<String, String> tags, int n) {
    return post(org, tags, n, UUID.randomUUID());
  }

  /** How long the stand-in daemon takes to "apply" each job posted from now on. */
  public volatile long applyMs = 200;

  /** Whether the jobs posted from now on fail (their provision's error is Coder's job error). */
  public volatile boolean failing;

  /**
   * A short terraform apply: longer than a provisionerd takes to hear that its daemon took a job
   * and signal it, even with a dozen builds' JVMs starting at once on two cores.
   */
  public static final long SHORT_APPLY_MS = 4_000;

  public List<UUID> post(UUID org, Map<String, String> tags, int n, UUID initiator) {
    List<UUID> ids = new java.util.ArrayList<>();
    String json = Json.write(tags);
    try (Connection c = DriverManager.getConnection(jdbc)) {
      for (int i = 0; i < n; i++) {
        UUID id = UUID.randomUUID();
        try (var st =
            c.prepareStatement(
                "INSERT INTO provisioner_jobs (id, created_at, updated_at, organization_id,"
                    + " initiator_id, provisioner, type, input, tags) VALUES (?, clock_timestamp(),"
                    + " clock_timestamp(), ?, ?, 'terraform', 'workspace_build', ?::jsonb,"
                    + " ?::jsonb)")) {
          st.setObject(1, id);
          st.setObject(2, org);
          st.setObject(3, initiator);
          st.setString(4, Json.write(Map.of("apply_ms", applyMs, "fail", failing)));
          st.setString(5, json);
          st.executeUpdate();
        }
        // Published after the insert committed, as coderd does (autocommit here).
        try (var st = c.prepareStatement("SELECT pg_notify('provisioner_job_posted', ?)")) {
          st.setString(
              1,
              Json.write(
                  Map.of("organization_id", org.toString(), "type", "terraform", "tags", tags)));
          st.execute();
        }
        ids.add(id);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return ids;
  }

  /**
   * A daemon of {@code org} with {@code daemonTags} acquires the oldest job it may take, as
   * coderd's {@code AcquireProvisionerJob}; null when there is none.
   */
  public UUID acquire(UUID org, Map<String, String> daemonTags, UUID worker) {
    List<Map<String, Object>> r = rows(ACQUIRE, worker, org, Json.write(daemonTags));
    return r.isEmpty() ? null : (UUID) r.get(0).get("id");
  }

  /**
   * {@code AcquireProvisionerJob} (coderd/database/queries/provisionerjobs.sql): the oldest job,
   * human-initiated before prebuilds, of the daemon's organization and provisioner type whose tags
   * its tags satisfy, skipping locked rows. Parameters: worker, organization, daemon tags (json).
   */
  public static final String ACQUIRE =
      "UPDATE provisioner_jobs SET started_at = clock_timestamp(), updated_at = clock_timestamp(),"
          + " worker_id = ? WHERE id = (SELECT id FROM provisioner_jobs AS potential_job WHERE"
          + " potential_job.started_at IS NULL AND potential_job.organization_id = ? AND"
          + " potential_job.provisioner = ANY('{terraform}'::provisioner_type[]) AND"
          + " provisioner_tagset_contains(?::jsonb, potential_job.tags::jsonb) ORDER BY"
          + " potential_job.initiator_id = 'c42fdf75-3097-471c-8c33-fb52454d81c0'::uuid ASC,"
          + " potential_job.created_at ASC FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id";

  /**
   * Which daemon took which job, as Coder records it: {@code provisioner_jobs.worker_id} is the id
   * of the daemon's row. Rows {daemon (name), job (text)}.
   */
  public List<Map<String, Object>> taken() {
    return rows(
        "SELECT d.name::text AS daemon, j.id::text AS job FROM provisioner_jobs j"
            + " JOIN provisioner_daemons d ON d.id = j.worker_id");
  }

  /**
   * Whether a daemon took more than one job (never: each runs one and exits), by Coder's tables.
   */
  public boolean aDaemonTookTwoJobs() {
    return !rows("SELECT worker_id FROM provisioner_jobs WHERE worker_id IS NOT NULL GROUP BY worker_id"
            + " HAVING count(*) > 1")
        .isEmpty();
  }

  /** Cancels a job as a user canceling its workspace build does. */
  public void cancel(UUID job) {
    exec(
        "UPDATE provisioner_jobs SET canceled_at = now(), completed_at = CASE WHEN worker_id IS"
            + " NULL THEN now() END WHERE id = '"
            + job
            + "'");
  }

  /** Completes a job as the daemon holding it reports success. */
  public void complete(UUID job) {
    exec(
        "UPDATE provisioner_jobs SET completed_at = now(), updated_at = now() WHERE id = '"
            + job
            + "'");
  }

  public long count(String where) {
    return ((Number)
            rows("SELECT count(*) AS n FROM provisioner_jobs WHERE " + where).get(0).get("n"))
        .longValue();
  }

  public void exec(String sql) {
    try (Connection c = DriverManager.getConnection(jdbc);
        var st = c.createStatement()) {
      st.execute(sql);
    } catch (SQLException e) {
      throw new IllegalStateException(sql + ": " + e.getMessage(), e);
    }
  }

  public List<Map<String, Object>> rows(String sql, Object... params) {
    try (Connection c = DriverManager.getConnection(jdbc)) {
      return Sql.rows(c, sql, params);
    } catch (SQLException e) {
      throw new IllegalStateException(sql + ": " + e.getMessage(), e);
    }
  }
}
