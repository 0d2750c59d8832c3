package io.oneshot.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ConfigLoaderTest {
  private static final String ROUTES =
      """
      routes:
        - {name: default, tags: {org: default}, maxConcurrent: 6}
      """;

  private static OneshotConfig parse(String yaml) {
    return ConfigLoader.parse(yaml, "oneshot.yaml", Map.of());
  }

  private static void refused(String yaml, String message) {
    assertThatThrownBy(() -> parse(yaml))
        .isInstanceOf(ConfigException.class)
        .hasMessage("oneshot.yaml: " + message);
  }

  @Test
  void theExampleConfigurationLoads() {
    OneshotConfig c = ConfigLoader.load(Path.of("dispatcher/oneshot.yaml"), Map.of());
    assertThat(c.routes())
        .extracting(OneshotConfig.Route::name)
        .containsExactly("default", "experimental", "demo");
    assertThat(c.routes()).extracting(OneshotConfig.Route::maxConcurrent).containsExactly(6, 2, 2);
    assertThat(c.dispatch().pollInterval()).isEqualTo(Duration.ofSeconds(2));
    assertThat(c.launcher().kind()).isEqualTo("local");
  }

  private static final String CLUSTERED =
      """
      api: {publicUrl: "http://oneshot:8080"}
      launcher: {kind: kubernetes, kubernetes: {namespace: builds, qps: 40, burst: 80}}
      """;

  @Test
  void aRouteLaunchesIntoItsClusterWhichTakesTheLaunchersLimitsUnlessItSaysOthers() {
    OneshotConfig c =
        parse(
            CLUSTERED
                + """
                clusters:
                  - {name: eu, kubeconfig: /etc/oneshot/clusters/eu/kubeconfig, context: ops, qps: 5}
                  - {name: local, inCluster: true, namespace: far}
                routes:
                  - {name: a, tags: {at: home}, template: script.yaml}
                  - {name: b, tags: {at: eu}, template: script.yaml, cluster: eu}
                """);
    assertThat(c.route("a").orElseThrow().cluster()).isEqualTo(OneshotConfig.HOME);
    assertThat(c.route("b").orElseThrow().cluster()).isEqualTo("eu");
    assertThat(c.usedClusters()).containsExactly("home", "eu");
    OneshotConfig.Cluster eu = c.cluster("eu");
    assertThat(eu.kubeconfig()).isEqualTo(Path.of("/etc/oneshot/clusters/eu/kubeconfig"));
    assertThat(eu.context()).isEqualTo("ops");
    assertThat(eu.qps()).isEqualTo(5);
    assertThat(eu.burst()).isEqualTo(80);
    assertThat(eu.namespace()).isEqualTo("builds");
    assertThat(c.cluster("local").namespace()).isEqualTo("far");
    assertThat(c.cluster("home").qps()).isEqualTo(40);
  }

  @Test
  void aClusterThatCannotBeUsedIsRefusedWithWhy() {
    String routes =
        """
        routes:
          - {name: a, tags: {at: home}, template: script.yaml, cluster: %s}
        """;
    refused(
        CLUSTERED + "clusters: [{name: eu, kubeconfig: /x}]\n" + routes.formatted("us"),
        "routes[0].cluster: names no cluster; clusters: home, eu, got \"us\"");
    refused(
        CLUSTERED + "clusters: [{name: home, kubeconfig: /x}]\n" + routes.formatted("home"),
        "clusters[0].name: home is the dispatcher's own cluster (launcher.kubernetes); name the"
            + " others, got \"home\"");
    refused(
        CLUSTERED + "clusters: [{name: eu}]\n" + routes.formatted("eu"),
        "clusters[0]: needs kubeconfig (a file, like a Secret mounted by the chart) or inCluster:"
            + " true");
    refused(
        CLUSTERED
            + "clusters: [{name: eu, kubeconfig: /x, inCluster: true}]\n"
            + routes.formatted("eu"),
        "clusters[0]: has both kubeconfig and inCluster: give one");
    refused(
        CLUSTERED
            + "clusters: [{name: eu, kubeconfig: /x}, {name: eu, kubeconfig: /y}]\n"
            + routes.formatted("eu"),
        "clusters[1].name: duplicate cluster 'eu' (also clusters[0])");
    refused(
        "clusters: [{name: eu, kubeconfig: /x}]\n"
            + "routes:\n  - {name: a, tags: {at: home}, cluster: eu}\n",
        "2 problems:\n"
            + "  clusters: needs launcher.kind kubernetes: clusters are Kubernetes APIs that routes"
            + " launch Jobs into (the local launcher runs builds as processes here)\n"
            + "  routes[0].cluster: names no cluster; clusters: home, got \"eu\"");
  }

  @Test
  void defaultsFillWhatIsNotSaid() {
    OneshotConfig c = parse(ROUTES);
    OneshotConfig.Route r = c.routes().get(0);
    assertThat(r.timeout()).isEqualTo(Duration.ofHours(1));
    assertThat(r.hangTimeout()).isEqualTo(Duration.ofMinutes(2));
    assertThat(r.cancelGrace()).isEqualTo(Duration.ofSeconds(60));
    assertThat(r.maxAttempts()).isEqualTo(3);
    assertThat(c.limits().maxInputBytes()).isEqualTo(1 << 20);
    assertThat(c.api().port()).isEqualTo(8080);
    assertThat(c.database().url()).isNull();
  }

  @Test
  void retryPoliciesHaveDefaultsAndAreCheckedWhenGiven() {
    OneshotConfig c = parse(ROUTES);
    assertThat(c.dispatch().launchRetry())
        .isEqualTo(new Backoff(Duration.ofMillis(500), Duration.ofSeconds(30)));
    assertThat(c.database().reconnect())
        .isEqualTo(new Backoff(Duration.ofMillis(100), Duration.ofSeconds(5)));
    assertThat(parse("dispatch: {launchRetry: {max: 2m}}\n" + ROUTES).dispatch().launchRetry())
        .isEqualTo(new Backoff(Duration.ofMillis(500), Duration.ofMinutes(2)));
    refused(
        "dispatch: {launchRetry: {initial: 10s, max: 1s}}\n" + ROUTES,
        "dispatch.launchRetry.max: must not be below initial (10s), got \"1s\"");
    refused(
        "database: {reconnect: {initial: 1s, limit: 5s}}\n" + ROUTES,
        "database.reconnect.limit: unknown field; known fields: initial, max");
  }

  @Test
  void environmentOverridesTheDatabaseUrlAndToken() {
    OneshotConfig c =
        ConfigLoader.parse(
            "database: {url: postgresql://a@b/c}\n" + ROUTES,
            "x",
            Map.of(
                ConfigLoader.ENV_DATABASE_URL, "postgresql://env@host/db",
                ConfigLoader.ENV_ADMIN_TOKEN, "0123456789abcdef-token"));
    assertThat(c.database().url()).isEqualTo("postgresql://env@host/db");
    assertThat(c.api().adminToken()).isEqualTo("0123456789abcdef-token");
  }

  @Test
  void aRouteLeaseDefaultsBelowItsHangTimeoutAndMustStayThere() {
    assertThat(parse("routes: [{name: a}]").routes().get(0).lease())
        .isEqualTo(Duration.ofSeconds(30));
    assertThat(parse("routes: [{name: a, hangTimeout: 20s}]").routes().get(0).lease())
        .as("half the hang timeout when that is shorter than 30s")
        .isEqualTo(Duration.ofSeconds(10));
    refused(
        "routes: [{name: a, hangTimeout: 20s, lease: 20s}]",
        "routes[0].lease: must be shorter than hangTimeout (20s): a runner stops itself before the"
            + " dispatcher gives up on it, got \"20s\"");
    refused(
        "routes: [{name: a, lease: 1s}]",
        "routes[0].lease: must be at least two heartbeats (dispatch.heartbeatInterval is 1s), so"
            + " that one lost heartbeat does not stop a build, got \"1s\"");
  }

  @Test
  void unknownFieldsAreRefusedWithTheNearestKnownName() {
    refused(
        """
        routes:
          - {name: a, maxConcurent: 3}
        """,
        "routes[0].maxConcurent: unknown field (did you mean maxConcurrent?); known fields: name,"
            + " tags, template, maxConcurrent, timeout, launchTimeout, hangTimeout, lease,"
            + " cancelGrace, drainGrace, passEnv, network, maxAttempts, retryAfterAcquire, namespace, untagged,"
            + " retention, warm, pod, team, cluster");
    refused(
        "dispatc: {}\n" + ROUTES,
        "dispatc: unknown field (did you mean dispatch?); known fields: database, api, dispatch,"
            + " limits, launcher, logging, retention, routes, sources, encryption, teams, clusters");
  }

  @Test
  void teamsAreReadWithTheirRoutesAndEveryRouteIsInOne() {
    OneshotConfig c =
        parse(
            """
            dispatch: {maxConcurrent: 40}
            teams:
              - {name: platform, weight: 2, guaranteed: 4, borrowLimit: 10, maxConcurrent: 30}
            routes:
              - {name: p1, tags: {t: p1}, team: platform}
              - {name: solo, tags: {t: solo}}
              - {name: p2, tags: {t: p2}, team: platform}
            """);
    assertThat(c.teams()).containsExactly(new OneshotConfig.Team("platform", 2, 4, 10, 30));
    // A route that names no team is a team of its own, of weight 1, in the order of first routes.
    assertThat(c.allTeams())
        .containsExactly(
            new OneshotConfig.Team("platform", 2, 4, 10, 30),
            new OneshotConfig.Team("solo", 1, 0, null, null));
  }

  @Test
  void teamsThatCannotBeKeptAreRefusedNamingTheField() {
    refused(
        """
        dispatch: {maxConcurrent: 10}
        teams:
          - {name: a, weight: 0, guaranteed: 8}
          - {name: a, guaranteed: 4}
          - {name: lonely}
          - {name: solo}
          - {name: Bad}
          - {weight: 2}
          - {name: b, borrowLimit: -1, maxConcurrent: x, wieght: 3}
        routes:
          - {name: r1, tags: {t: r1}, team: a}
          - {name: r2, tags: {t: r2}, team: nope}
          - {name: solo, tags: {t: solo}}
          - {name: r3, tags: {t: r3}, team: b}
          - {name: r4, tags: {t: r4}, team: Bad}
        """,
        """
        11 problems:
          teams[0].weight: must be an integer from 1 to 1000, got 0
          teams[1].name: duplicate team 'a' (also teams[0])
          teams[4].name: must be 1 to 32 lowercase letters, digits or '-', starting and ending\
         with a letter or digit, got "Bad"
          teams[5].name: is required
          teams[6].wieght: unknown field (did you mean weight?); known fields: name, weight,\
         guaranteed, borrowLimit, maxConcurrent
          teams[6].borrowLimit: must be an integer from 0 to 100000, got -1
          teams[6].maxConcurrent: must be an integer from 0 to 100000, got "x"
          teams: guarantee 12 slots together, more than dispatch.maxConcurrent (10): a guarantee\
         must be one the global limit can keep
          routes[1].team: names no team in teams (Bad, a, b, lonely, solo), got "nope"
          teams[2].name: no route names team lonely
          teams[3].name: route solo names no team, so it is a team of its own of that name: give\
         this team another name, or put the route in it (team: solo)\
        """);
    refused(
        "teams: {name: a}\n" + ROUTES,
        "teams: must be a list of teams like {name: platform, weight: 2, guaranteed: 4,"
            + " borrowLimit: 10}, got {\"name\":\"a\"}");
  }

  @Test
  void everyProblemIsReportedAtOnce() {
    refused(
        """
        dispatch: {maxConcurrent: many, pollIntervl: 2s}
        launcher: {kind: kubernetes}
        routes:
          - {name: Default, maxConcurrent: -1, template: t.yaml}
          - {name: b, tags: {org: "a b"}, timeout: soon, template: t.yaml}
        """,
        """
        7 problems:
          dispatch.pollIntervl: unknown field (did you mean pollInterval?); known fields:\
         maxConcurrent, claimBatch, pollInterval, wakeOnNotify, rescueInterval,\
         listenerHealthInterval, heartbeatInterval, leaderInterval, shutdownGrace, launchRetry,\
         warmInterval
          dispatch.maxConcurrent: must be an integer from 1 to 100000, got "many"
          api.publicUrl: is required with launcher.kind kubernetes: the URL pods reach the API at,\
         like http://oneshot.oneshot.svc:8080
          routes[0].name: must be 1 to 32 lowercase letters, digits or '-', starting and ending\
         with a letter or digit, got "Default"
          routes[0].maxConcurrent: must be an integer from 0 to 100000, got -1
          routes[1].tags.org: is not a valid tag value: up to 63 letters, digits, '.', '_' or\
         '-', starting and ending with a letter or digit, got "a b"
          routes[1].timeout: 'soon' is not a duration; write it like 250ms, 2s, 5m, 1h or 1h30m\
        """);
  }

  @Test
  void aCoderSourceNeedsOnlyItsDatabaseAndTheRoutesItFeeds() {
    OneshotConfig c =
        ConfigLoader.parse(
            ROUTES
                + """
                sources:
                  - name: coder
                    kind: coder
                    databaseUrlEnv: CODER_DATABASE_URL
                    routes: [{route: default, organization: coder}]
                """,
            "oneshot.yaml",
            Map.of("CODER_DATABASE_URL", "postgresql://reader@coder-db/coder"));
    OneshotConfig.Source s = c.sources().get(0);
    assertThat(s.url()).isEqualTo("postgresql://reader@coder-db/coder");
    assertThat(s.channel()).isEqualTo("provisioner_job_posted");
    assertThat(s.pollInterval()).isEqualTo(Duration.ofSeconds(5));
    assertThat(s.feeds()).containsExactly(new OneshotConfig.Feed("default", "coder"));
    assertThat(parse(ROUTES).sources()).isEmpty();
  }

  @Test
  void sourcesAreCheckedAndEveryProblemIsSaid() {
    refused(
        ROUTES
            + """
            sources:
              - {name: coder, kind: coder, databaseUrlEnv: NOT_SET, query: SELECT 1,
                 routes: [default]}
              - {name: own, kind: postgres, databaseUrl: 'mysql://x', channel: "Jobs!",
                 routes: [{route: nowhere, organization: acme}]}
              - {name: coder, kind: kafka, databaseUrl: 'postgresql://x/y', channel: jobs,
                 query: SELECT 1, input: {provisioner: script, command: ["true"]}, routes: [default]}
            """,
        """
        11 problems:
          sources[0].databaseUrlEnv: names NOT_SET, which is not set in the dispatcher's environment
          sources[0].query: is fixed for kind coder (Coder's table and the coder provisioner)
          sources[0].routes[0]: must be {route, organization} for kind coder: a provisioner key\
         belongs to one organization, got "default"
          sources[1].databaseUrl: must be a postgresql:// URL (the value is not shown: it may hold a\
         password)
          sources[1].channel: must be a lowercase PostgreSQL identifier: letters, digits and '_', not\
         starting with a digit, got "Jobs!"
          sources[1].query: is required for kind postgres: a read-only query returning tags (a JSON\
         object) and waiting (a count), one row per tag set
          sources[1].input: is required for kind postgres: the input of each build, like\
         {provisioner: script, command: [./take-one-job]}
          sources[1].routes[0].organization: is only for kind coder
          sources[1].routes[0]: names no route; routes: default, got "nowhere"
          sources[2].name: duplicate source 'coder' (also sources[0])
          sources[2].kind: must be postgres or coder, got "kafka"\
        """);
  }

  @Test
  void aBuildsEnvironmentGetsOnlyWhatItsRouteNames() {
    OneshotConfig ok =
        parse(
            """
            launcher: {local: {passEnv: [HTTPS_PROXY]}}
            routes:
              - {name: coder-a, tags: {team: a}, passEnv: [CODER_PROVISIONER_DAEMON_KEY_CODER_A]}
              - {name: coder-b, tags: {team: b}}
            """);
    assertThat(ok.routes().get(0).passEnv())
        .containsExactly("CODER_PROVISIONER_DAEMON_KEY_CODER_A");
    assertThat(ok.routes().get(1).passEnv()).isEmpty();
    // Another route's key, in a route's own list: refused, the field named.
    refused(
        """
        routes:
          - {name: coder-a, tags: {team: a}}
          - {name: coder-b, tags: {team: b}, passEnv: [HOME, CODER_PROVISIONER_DAEMON_KEY_CODER_A]}
        """,
        "routes[1].passEnv[1]: is route coder-a's Coder key: only that route's builds may get it"
            + ", got \"CODER_PROVISIONER_DAEMON_KEY_CODER_A\"");
    // The launcher's list reaches every route's builds: no route's key there.
    refused(
        """
        launcher: {local: {passEnv: [CODER_PROVISIONER_DAEMON_KEY_CODER_A]}}
        routes:
          - {name: coder-a, tags: {team: a}}
        """,
        "launcher.local.passEnv[0]: is route coder-a's Coder key, and this list reaches every"
            + " route's builds: name it in that route's passEnv, got"
            + " \"CODER_PROVISIONER_DAEMON_KEY_CODER_A\"");
    // The dispatcher's own secrets and a source's database URL reach no build.
    refused(
        """
        routes:
          - {name: a, passEnv: [ONESHOT_ADMIN_TOKEN]}
        """,
        "routes[0].passEnv[0]: is one of the dispatcher's own secrets: no build may get it, got"
            + " \"ONESHOT_ADMIN_TOKEN\"");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    """
                    launcher: {local: {passEnv: [CODER_DB]}}
                    routes:
                      - {name: coder, tags: {org: x}}
                    sources:
                      - {name: coder, kind: coder, databaseUrlEnv: CODER_DB,
                         routes: [{route: coder, organization: x}]}
                    """,
                    "oneshot.yaml",
                    Map.of("CODER_DB", "postgresql://coder:pw@db/coder")))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            "oneshot.yaml: launcher.local.passEnv[0]: is one of the dispatcher's own secrets: no"
                + " build may get it, got \"CODER_DB\"");
    refused(
        """
        routes:
          - {name: a, passEnv: ["NOT A NAME"]}
        """,
        "routes[0].passEnv[0]: must name an environment variable, got \"NOT A NAME\"");
  }

  @Test
  void anIsolatedAttemptsNetworkIsItsOwnUnlessItsRouteNeedsTheMachinesAndACoderRouteDoes() {
    OneshotConfig plain = parse(ROUTES);
    assertThat(plain.launcher().local().network()).isEqualTo("none");
    assertThat(plain.routes().get(0).network()).isNull();
    OneshotConfig c =
        ConfigLoader.parse(
            """
            launcher: {local: {network: host}}
            routes:
              - {name: coder, tags: {org: x}}
              - {name: sealed, tags: {org: y}, network: none}
            sources:
              - {name: coder, kind: coder, databaseUrlEnv: CODER_DB,
                 routes: [{route: coder, organization: x}]}
            """,
            "oneshot.yaml",
            Map.of("CODER_DB", "postgresql://reader@db/coder"));
    assertThat(c.launcher().local().network()).isEqualTo("host");
    assertThat(c.routes().get(0).network()).as("Coder's daemon must reach Coder").isEqualTo("host");
    assertThat(c.routes().get(1).network()).isEqualTo("none");
    assertThatThrownBy(
            () ->
                parse(
                    """
                    launcher: {local: {network: bridge}}
                    routes:
                      - {name: a, network: outside}
                    """))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(
            "launcher.local.network: must be none (each isolated attempt has a network of its own,"
                + " and the API through a socket) or host (the machine's network, loopback"
                + " services included), got \"bridge\"")
        .hasMessageContaining("routes[0].network: must be none")
        .hasMessageContaining("got \"outside\"");
    assertThatThrownBy(
            () ->
                ConfigLoader.parse(
                    """
                    routes:
                      - {name: coder, tags: {org: x}, network: none}
                    sources:
                      - {name: coder, kind: coder, databaseUrlEnv: CODER_DB,
                         routes: [{route: coder, organization: x}]}
                    """,
                    "oneshot.yaml",
                    Map.of("CODER_DB", "postgresql://reader@db/coder")))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(
            "routes[0].network: cannot be none on a route a Coder source feeds: its provisioner"
                + " daemon must reach Coder (use host), got \"none\"");
  }

  @Test
  void routesAreRequired() {
    refused("dispatch: {}\n", "routes: at least one route is required");
    refused("routes: []\n", "routes: must be a non-empty list of routes");
  }

  @Test
  void duplicateRouteNamesAreRefused() {
    refused(
        """
        routes:
          - {name: gpu, tags: {gpu: "true"}}
          - {name: cpu, tags: {cpu: "true"}}
          - {name: gpu, tags: {gpu: "yes"}}
        """,
        "routes[2].name: duplicate route 'gpu' (also routes[0])");
  }

  @Test
  void aRouteThatCanNeverMatchIsRefused() {
    refused(
        """
        routes:
          - {name: wide, tags: {org: default, gpu: "true"}}
          - {name: narrow, tags: {org: default}}
        """,
        "routes[1].tags: route 'narrow' can never match: every build it could take goes to"
            + " routes[0] 'wide' first, whose tags contain all of this route's tags; give it a tag"
            + " the earlier route lacks, or move it up");
  }

  @Test
  void routesTakeUntaggedBuildsWhenTheyHaveNoTagsOrSaySo() {
    OneshotConfig c =
        parse(
            """
            routes:
              - {name: a, tags: {org: a}}
              - {name: b, tags: {org: b}, untagged: true}
              - {name: c, tags: {org: c}}
            """);
    assertThat(c.routes())
        .extracting(OneshotConfig.Route::untagged)
        .containsExactly(false, true, false);
    assertThat(parse("routes: [{name: any}]").routes().get(0).untagged()).isTrue();
    // A route without tags that refuses untagged builds takes nothing.
    refused(
        "routes: [{name: a, tags: {org: a}}, {name: none, untagged: false}]",
        "routes[1].untagged: route 'none' can never match: a route without tags takes only"
            + " untagged builds; set untagged: true");
    // Untagged builds go to the first route that takes them: a later one without tags gets none.
    refused(
        "routes: [{name: a, tags: {org: a}, untagged: true}, {name: rest}]",
        "routes[1].tags: route 'rest' can never match: untagged builds go to routes[0] 'a' first,"
            + " which takes them (untagged: true); move this route up, or give it tags");
    // A route for untagged builds after tagged routes that do not take them is reachable.
    assertThat(parse("routes: [{name: a, tags: {org: a}}, {name: rest}]").routes()).hasSize(2);
  }

  @Test
  void retentionIsSetForAllRoutesAndPerRoute() {
    OneshotConfig c =
        parse(
            """
            retention: {age: 30d, count: 1000}
            routes:
              - {name: a, tags: {org: a}, retention: {count: 10}}
              - {name: b, tags: {org: b}, retention: {age: forever}}
              - {name: c, tags: {org: c}}
            """);
    assertThat(c.routes().get(0).retention().age()).isEqualTo(Duration.ofDays(30));
    assertThat(c.routes().get(0).retention().count()).isEqualTo(10);
    assertThat(c.routes().get(1).retention().age()).isNull();
    assertThat(c.routes().get(1).retention().count()).isEqualTo(1000);
    assertThat(c.routes().get(2).retention()).isEqualTo(c.retention());
    assertThat(parse(ROUTES).retention().keepsAll()).isTrue();
    refused("retention: {age: 10s}\n" + ROUTES, "retention.age: must be at least 1m, got \"10s\"");
  }

  @Test
  void valuesAreChecked() {
    refused(
        "routes:\n  - {name: a, maxConcurrent: six}\n",
        "routes[0].maxConcurrent: must be an integer from 0 to 100000, got \"six\"");
    refused(
        "routes:\n  - {name: a, timeout: 5 minutes}\n",
        "routes[0].timeout: '5 minutes' is not a duration; write it like 250ms, 2s, 5m, 1h or"
            + " 1h30m");
    refused(
        "routes:\n  - {name: A_b}\n",
        "routes[0].name: must be 1 to 32 lowercase letters, digits or '-', starting and ending"
            + " with a letter or digit, got \"A_b\"");
    refused(
        "routes:\n  - {name: a, tags: {os: \"win dows\"}}\n",
        "routes[0].tags.os: is not a valid tag value: up to 63 letters, digits, '.', '_' or '-',"
            + " starting and ending with a letter or digit, got \"win dows\"");
    refused(
        "limits: {maxLogLineBytes: 10}\n" + ROUTES,
        "limits.maxLogLineBytes: must be from 256 B to 1 MiB, got \"10\"");
    refused(
        "api: {listen: nowhere}\n" + ROUTES,
        "api.listen: must be host:port, like 0.0.0.0:8080, got \"nowhere\"");
    refused(
        "api: {metricsListen: 9090}\n" + ROUTES,
        "api.metricsListen: must be host:port, like 0.0.0.0:9090 (port from 0 to 65535), got"
            + " \"9090\"");
    refused(
        "api: {listen: 0.0.0.0:8080, metricsListen: 0.0.0.0:8080}\n" + ROUTES,
        "api.metricsListen: must be another port than listen's: the API's port serves /metrics"
            + " only to the admin token, got \"0.0.0.0:8080\"");
    refused(
        "launcher: {kind: nomad}\n" + ROUTES,
        "launcher.kind: must be local or kubernetes, got \"nomad\"");
  }

  @Test
  void badYamlSaysWhere() {
    assertThatThrownBy(() -> parse("routes: [\n  {name: a\n"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("oneshot.yaml: not valid YAML: ")
        .hasMessageContaining("line ");
  }

  @Test
  void durationsAndSizesParse() {
    assertThat(Units.parseDuration("1h30m")).isEqualTo(Duration.ofMinutes(90));
    assertThat(Units.parseDuration("250ms")).isEqualTo(Duration.ofMillis(250));
    assertThat(Units.format(Duration.ofSeconds(90))).isEqualTo("1m30s");
    assertThat(Units.parseSize("16KiB")).isEqualTo(16384);
    assertThat(Units.formatSize(64L << 20)).isEqualTo("64 MiB");
    assertThatThrownBy(() -> Units.parseDuration("2 s"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void encryptionKeysComeFromTheFileAKeysFileOrTheEnvironmentTheSealingKeyFirst(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
    String a = "a".repeat(32);
    String b = "b".repeat(40);
    assertThat(parse(ROUTES).encryption().keys()).isEmpty();
    assertThat(
            parse(
                    "encryption: {keys: [{id: new, secret: "
                        + b
                        + "}, {id: old, secret: "
                        + a
                        + "}]}\n"
                        + ROUTES)
                .encryption()
                .keys())
        .extracting(OneshotConfig.Key::id)
        .containsExactly("new", "old");
    java.nio.file.Path file = dir.resolve("keys");
    java.nio.file.Files.writeString(file, "# newest first\nk2=" + b + "\nk1=" + a + "\n");
    assertThat(parse("encryption: {keysFile: " + file + "}\n" + ROUTES).encryption().keys())
        .extracting(OneshotConfig.Key::id)
        .containsExactly("k2", "k1");
    OneshotConfig fromEnv =
        ConfigLoader.parse(
            "encryption: {keysFile: /nowhere}\n" + ROUTES,
            "oneshot.yaml",
            Map.of("ONESHOT_ENCRYPTION_KEYS", "e1=" + a + ",e0=" + b));
    assertThat(fromEnv.encryption().keys())
        .extracting(OneshotConfig.Key::id)
        .containsExactly("e1", "e0");
    // The secret never shows in the configuration's text.
    assertThat(fromEnv.encryption().toString()).doesNotContain(a);
  }

  @Test
  void badEncryptionKeysAreRefusedAllAtOnce() {
    refused(
        "encryption: {keys: [{id: k1, secret: short}, {id: \"bad id\", secret: "
            + "x".repeat(32)
            + "}, {id: k1}]}\n"
            + ROUTES,
        "3 problems:\n"
            + "  encryption.keys[0]: key k1: the secret must be at least 32 characters (say,"
            + " openssl rand -base64 32)\n"
            + "  encryption.keys[1]: key id bad id: letters, digits, '.', '_' and '-', at most 64\n"
            + "  encryption.keys[2]: needs an id and a secret");
  }

  private static final String KUBE_HOME =
      "api: {publicUrl: \"http://127.0.0.1:8080\"}\nlauncher: {kind: kubernetes}\n";

  @Test
  void aRoutesWarmRoomIsReadWithItsDefaults() {
    OneshotConfig c =
        parse(
            KUBE_HOME
                + "routes:\n"
                + "  - name: a\n"
                + "    template: script.yaml\n"
                + "    maxConcurrent: 20\n"
                + "    warm:\n"
                + "      idle: 2\n"
                + "      scaleFactor: 0.5\n"
                + "      max: 12\n"
                + "      schedule:\n"
                + "        - {cron: \"30 8 * * 1-5\", length: 90m, timeZone: Europe/Berlin, balloons: 10}\n"
                + "      forecast: {}\n");
    OneshotConfig.Warm w = c.routes().get(0).warm();
    assertThat(w.idle()).isEqualTo(2);
    assertThat(w.scaleFactor()).isEqualTo(0.5);
    assertThat(w.max()).isEqualTo(12);
    assertThat(w.schedule())
        .containsExactly(
            new OneshotConfig.Period(
                "30 8 * * 1-5", Duration.ofMinutes(90), java.time.ZoneId.of("Europe/Berlin"), 10));
    assertThat(w.forecast()).isEqualTo(new OneshotConfig.Forecast(4, 75, Duration.ofMinutes(15)));
    assertThat(w.command()).isEqualTo(OneshotConfig.Warm.DEFAULT_COMMAND);
    assertThat(c.dispatch().warmInterval()).isEqualTo(Duration.ofSeconds(15));
    assertThat(c.launcher().kubernetes().balloonPriorityClass()).isEqualTo("oneshot-balloon");
  }

  @Test
  void badWarmRoomIsRefusedNamingEachField() {
    assertThatThrownBy(
            () ->
                parse(
                    KUBE_HOME
                        + "dispatch: {warmInterval: 1m}\n"
                        + "retention: {age: 7d}\n"
                        + "routes:\n"
                        + "  - name: a\n"
                        + "    template: script.yaml\n"
                        + "    maxConcurrent: 5\n"
                        + "    warm:\n"
                        + "      idle: -1\n"
                        + "      max: 6\n"
                        + "      scaleFactor: lots\n"
                        + "      schedule:\n"
                        + "        - {cron: \"30 25 * * *\", length: 90m, timeZone: Mars/Olympus,"
                        + " balloons: 3}\n"
                        + "        - {cron: \"0 9 * * *\"}\n"
                        + "      forecast: {weeks: 2, ahead: 2d}\n"
                        + "      command: []\n"
                        + "      idel: 3\n"))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("12 problems")
        .hasMessageContaining(
            "dispatch.warmInterval: must be at most 30s: a schedule period that begins waits no"
                + " longer than this for its balloons, got \"1m\"")
        .hasMessageContaining("routes[0].warm.idel: unknown field (did you mean idle?)")
        .hasMessageContaining("routes[0].warm.idle: must be an integer from 0 to 10000, got -1")
        .hasMessageContaining(
            "routes[0].warm.scaleFactor: must be a number from 0.0 to 100.0, got \"lots\"")
        .hasMessageContaining(
            "routes[0].warm.schedule[0].cron: must be a cron expression of five fields (minute"
                + " hour day-of-month month day-of-week):")
        .hasMessageContaining(
            "routes[0].warm.schedule[0].timeZone: must be a time zone of the tz database, like"
                + " Europe/Berlin or UTC, got \"Mars/Olympus\"")
        .hasMessageContaining(
            "routes[0].warm.schedule[1].length: is required: how long the period lasts, like 90m")
        .hasMessageContaining(
            "routes[0].warm.schedule[1].balloons: is required: how many balloons the period keeps")
        .hasMessageContaining("routes[0].warm.forecast.ahead: must be at most 24h, got \"48h\"")
        .hasMessageContaining(
            "routes[0].warm.forecast.weeks: reads 2 weeks of the route's builds, but retention.age"
                + " keeps 168h: keep at least 384h")
        .hasMessageContaining(
            "routes[0].warm.max: must not exceed the route's maxConcurrent (5): a balloon is room"
                + " for a build the route could start, got 6")
        .hasMessageContaining("routes[0].warm.command: must name a program: what a balloon runs");
  }

  @Test
  void warmRoomNeedsTheKubernetesLauncher() {
    refused(
        "routes: [{name: a, warm: {idle: 1}}]",
        "routes[0].warm: needs launcher.kind kubernetes: warm room is pods of the route's shape"
            + " held on its nodes (the local launcher runs builds as processes here)");
    // A warm block that keeps nothing is no balloon: the local launcher takes it.
    assertThat(parse("routes: [{name: a, warm: {idle: 0}}]").routes().get(0).warm().any())
        .isFalse();
  }

  @Test
  void aRoutesPodRulesAreReadAndBadOnesRefusedNamingEachField() {
    OneshotConfig c =
        parse(
            KUBE_HOME
                + "routes:\n"
                + "  - name: a\n"
                + "    template: script.yaml\n"
                + "    pod:\n"
                + "      maxRequests: {cpu: 2, memory: 4Gi}\n"
                + "      images: ghcr.io/acme/*\n"
                + "      nodeSelector: {pool: [gpu]}\n"
                + "      serviceAccounts: [builder]\n");
    OneshotConfig.PodRules p = c.routes().get(0).pod();
    assertThat(p.overLimit()).isEqualTo("clamp");
    assertThat(p.maxRequests()).isEqualTo(Map.of("cpu", "2", "memory", "4Gi"));
    assertThat(p.maxLimits()).isEmpty();
    assertThat(p.images()).containsExactly("ghcr.io/acme/*");
    assertThat(p.nodeSelector()).isEqualTo(Map.of("pool", java.util.List.of("gpu")));
    assertThat(p.serviceAccounts()).containsExactly("builder");
    assertThat(
            parse(KUBE_HOME + "routes: [{name: a, template: script.yaml}]").routes().get(0).pod())
        .isNull();
    assertThatThrownBy(
            () ->
                parse(
                    KUBE_HOME
                        + "routes:\n"
                        + "  - name: a\n"
                        + "    template: script.yaml\n"
                        + "    pod:\n"
                        + "      overLimit: shrug\n"
                        + "      maxRequests: {cpu: lots, \"Memory\": 1Gi}\n"
                        + "      labels: {\"oneshot.io/build\": [\"*\"]}\n"
                        + "      annotations: {\"kubernetes.io/x\": [\"*\"]}\n"
                        + "      serviceAccounts: [Root]\n"
                        + "      privileged: true\n"))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("7 problems")
        .hasMessageContaining("routes[0].pod.privileged: unknown field")
        .hasMessageContaining("routes[0].pod.overLimit: must be clamp")
        .hasMessageContaining(
            "routes[0].pod.maxRequests.cpu: must be a quantity like 500m, 2, 512Mi or 4Gi, got \"lots\"")
        .hasMessageContaining("routes[0].pod.maxRequests.Memory: is not a resource name")
        .hasMessageContaining(
            "routes[0].pod.labels.oneshot.io/build: keys under oneshot.io/ are oneshot's own (a"
                + " build's identity): no build may set them")
        .hasMessageContaining(
            "routes[0].pod.annotations.kubernetes.io/x: keys under kubernetes.io/ are reserved by"
                + " Kubernetes")
        .hasMessageContaining("routes[0].pod.serviceAccounts[0]: must be a ServiceAccount's name");
    refused(
        "routes: [{name: a, pod: {images: [x]}}]",
        "routes[0].pod: needs launcher.kind kubernetes: a build's pod settings are for the Job's"
            + " pod (the local launcher runs builds as processes here)");
  }

  @Test
  void quantitiesAndGlobsMeanWhatKubernetesAndTheDocsSay() {
    assertThat(Quantities.parse("500m")).isEqualByComparingTo("0.5");
    assertThat(Quantities.parse("1.5Gi")).isEqualByComparingTo(String.valueOf(3L << 29));
    assertThat(Quantities.parse("2")).isEqualByComparingTo("2");
    assertThat(Quantities.parse("1e3")).isEqualByComparingTo("1000");
    assertThat(Quantities.parse("2M")).isEqualByComparingTo("2000000");
    assertThat(Quantities.parse("1.")).isEqualByComparingTo("1");
    assertThat(Quantities.parse("-1")).isNull();
    assertThat(Quantities.parse("1 Gi")).isNull();
    assertThat(Quantities.parse("1GB")).isNull();
    String r = Globs.toRegex("ghcr.io/acme/*:1.?");
    assertThat("ghcr.io/acme/tools:1.4").matches(r);
    assertThat("ghcr.io/acme/tools:1.10").doesNotMatch(r);
    assertThat("ghcrXio/acme/tools:1.4").as("a dot is a dot").doesNotMatch(r);
    assertThat("x.ghcr.io/acme/t:1.4").as("anchored").doesNotMatch(r);
  }
}
