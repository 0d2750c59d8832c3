package io.oneshot.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.oneshot.config.OneshotConfig.Api;
import io.oneshot.config.OneshotConfig.Database;
import io.oneshot.config.OneshotConfig.Dispatch;
import io.oneshot.config.OneshotConfig.Launcher;
import io.oneshot.config.OneshotConfig.Limits;
import io.oneshot.config.OneshotConfig.Local;
import io.oneshot.config.OneshotConfig.Route;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Reads {@code oneshot.yaml} into a {@link OneshotConfig}, checking every field once. Errors name
 * the field by its path and say the rule: {@code routes[1].maxConcurrent: must be an integer >= 0,
 * got "six"}. Unknown fields are errors too, so a misspelt key never silently means its default.
 */
public final class ConfigLoader {
  public static final String ENV_DATABASE_URL = "ONESHOT_DATABASE_URL";
  public static final String ENV_ADMIN_TOKEN = "ONESHOT_ADMIN_TOKEN";

  static final Pattern ROUTE_NAME = Pattern.compile("^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$");
  static final Pattern TAG_KEY =
      Pattern.compile("^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$");
  static final Pattern TAG_VALUE =
      Pattern.compile("^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$");

  /** The fields a route may have (the chart's values schema lists the same). */
  public static final List<String> ROUTE_FIELDS =
      List.of(
          "name",
          "tags",
          "template",
          "maxConcurrent",
          "timeout",
          "launchTimeout",
          "hangTimeout",
          "lease",
          "cancelGrace",
          "drainGrace",
          "passEnv",
          "network",
          "maxAttempts",
          "retryAfterAcquire",
          "namespace",
          "untagged",
          "retention",
          "warm",
          "pod",
          "team",
          "cluster");

  /**
   * The Kubernetes client's default rate: a launch is three requests (docs/performance.md), so the
   * burst lets the first 100 launches of a 9:00 burst go at once and {@code qps} carries the rest:
   * 200 builds are created within about 3 seconds. The API server's priority and fairness still has
   * the last word (docs/operating.md).
   */
  public static final int DEFAULT_QPS = 100;

  public static final int DEFAULT_BURST = 300;

  /**
   * Launches talking to the API server at once: enough to keep {@link #DEFAULT_QPS} busy at 0.6 s a
   * launch, few enough to hold a small share of the API server's seats.
   */
  public static final int DEFAULT_LAUNCHES_IN_FLIGHT = 64;

  static final Pattern NAMESPACE = Pattern.compile("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$");
  private static final String NAMESPACE_RULE =
      "must be a Kubernetes namespace: 1 to 63 lowercase letters, digits or '-', starting and"
          + " ending with a letter or digit";

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

  private ConfigLoader() {}

  /** A configuration file's text; a missing or unreadable file is a {@link ConfigException}. */
  public static String readFile(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      throw new ConfigException(file + ": no such file");
    } catch (IOException e) {
      throw new ConfigException(file + ": cannot be read: " + e.getMessage(), e);
    }
  }

  /**
   * The file as YAML, unchecked: for a look at a value before the configuration is read whole
   * ({@code dispatcher --check}); a missing node when it is not YAML (the load then says where).
   */
  public static JsonNode tree(Path file) {
    try {
      JsonNode n = YAML.readTree(readFile(file));
      return n == null ? com.fasterxml.jackson.databind.node.MissingNode.getInstance() : n;
    } catch (JsonProcessingException e) {
      return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
    }
  }

  public static OneshotConfig load(Path file, Map<String, String> env) {
    return parse(readFile(file), file.toString(), env);
  }

  public static OneshotConfig parse(String yaml, String source, Map<String, String> env) {
    JsonNode root;
    try {
      root = YAML.readTree(yaml);
    } catch (JsonProcessingException e) {
      throw new ConfigException(
          source + ": not valid YAML: " + e.getOriginalMessage() + locationOf(e), e);
    }
    if (root == null || root.isMissingNode() || root.isNull()) {
      root = YAML.createObjectNode();
    }
    ConfigNode top = ConfigNode.root(root);
    OneshotConfig config = read(top, env);
    if (!top.problems().isEmpty()) {
      throw new ConfigException(source + ": " + ConfigException.summary(top.problems()));
    }
    return config;
  }

  private static String locationOf(JsonProcessingException e) {
    return e.getLocation() == null
        ? ""
        : " (line "
            + e.getLocation().getLineNr()
            + ", column "
            + e.getLocation().getColumnNr()
            + ")";
  }

  private static OneshotConfig read(ConfigNode file, Map<String, String> env) {
    ConfigNode root = file.requireObject();
    root.allowOnly(
        "database",
        "api",
        "dispatch",
        "limits",
        "launcher",
        "logging",
        "retention",
        "routes",
        "sources",
        "encryption",
        "teams",
        "clusters");

    ConfigNode db = root.object("database");
    db.allowOnly("url", "poolSize", "reconnect");
    String url = env.getOrDefault(ENV_DATABASE_URL, db.string("url", null));
    Database database =
        new Database(
            url, db.integer("poolSize", 10, 1, 200), db.backoff("reconnect", "100ms", "5s"));

    ConfigNode apiNode = root.object("api");
    apiNode.allowOnly(
        "listen",
        "publicUrl",
        "adminToken",
        "adminTokenFile",
        "headerTimeout",
        "keepAliveTimeout",
        "bodyTimeout",
        "maxConnections",
        "metricsListen");
    String listen = apiNode.string("listen", "0.0.0.0:8080");
    int colon = listen.lastIndexOf(':');
    String host = "0.0.0.0";
    int port = 8080;
    if (colon <= 0 || !listen.substring(colon + 1).matches("[0-9]{1,5}")) {
      apiNode.child("listen").report("must be host:port, like 0.0.0.0:8080", listen);
    } else if (Integer.parseInt(listen.substring(colon + 1)) > 65535) {
      apiNode.child("listen").report("port must be from 0 to 65535", listen);
    } else {
      host = listen.substring(0, colon);
      port = Integer.parseInt(listen.substring(colon + 1));
    }
    String publicUrl = apiNode.string("publicUrl", null);
    if (publicUrl != null && !publicUrl.matches("^https?://[^\\s/]+(/.*)?$")) {
      apiNode
          .child("publicUrl")
          .report("must be an http:// or https:// URL that provisionerd can reach", publicUrl);
    }
    String token = apiNode.string("adminToken", null);
    String tokenFile = apiNode.string("adminTokenFile", null);
    if (token != null && tokenFile != null) {
      apiNode.child("adminTokenFile").report("give adminToken or adminTokenFile, not both");
    }
    // The environment wins over both, and then the file need not exist.
    if (tokenFile != null && !env.containsKey(ENV_ADMIN_TOKEN)) {
      try {
        token = Files.readString(Path.of(tokenFile)).strip();
      } catch (IOException e) {
        apiNode.child("adminTokenFile").report("cannot be read: " + e.getMessage());
      }
    }
    token = env.getOrDefault(ENV_ADMIN_TOKEN, token);
    if (token != null && token.length() < 16) {
      apiNode.child("adminToken").report("must be at least 16 characters");
    }
    Api api =
        new Api(
            host,
            port,
            publicUrl,
            token,
            apiNode.duration("headerTimeout", "10s", Duration.ofMillis(100)),
            apiNode.duration("keepAliveTimeout", "60s", Duration.ofMillis(100)),
            apiNode.duration("bodyTimeout", "60s", Duration.ofMillis(100)),
            apiNode.integer("maxConnections", 1000, 2, 1_000_000),
            null,
            -1);
    String metricsListen = apiNode.string("metricsListen", null);
    int metricsColon = metricsListen == null ? -1 : metricsListen.lastIndexOf(':');
    if (metricsListen == null) {
      // /metrics on the API's port alone, with the admin token.
    } else if (metricsColon <= 0
        || !metricsListen.substring(metricsColon + 1).matches("[0-9]{1,5}")
        || Integer.parseInt(metricsListen.substring(metricsColon + 1)) > 65535) {
      apiNode
          .child("metricsListen")
          .report("must be host:port, like 0.0.0.0:9090 (port from 0 to 65535)", metricsListen);
    } else {
      int metricsPort = Integer.parseInt(metricsListen.substring(metricsColon + 1));
      if (metricsPort != 0 && metricsPort == port) {
        apiNode
            .child("metricsListen")
            .report(
                "must be another port than listen's: the API's port serves /metrics only to the admin token",
                metricsListen);
      }
      api = api.withMetrics(metricsListen.substring(0, metricsColon), metricsPort);
    }

    ConfigNode d = root.object("dispatch");
    d.allowOnly(
        "maxConcurrent",
        "claimBatch",
        "pollInterval",
        "wakeOnNotify",
        "rescueInterval",
        "listenerHealthInterval",
        "heartbeatInterval",
        "leaderInterval",
        "shutdownGrace",
        "launchRetry",
        "warmInterval");
    Dispatch dispatch =
        new Dispatch(
            d.integer("maxConcurrent", 100, 1, 100_000),
            d.integer("claimBatch", 100, 1, 10_000),
            d.duration("pollInterval", "2s", Duration.ofMillis(10)),
            d.bool("wakeOnNotify", true),
            d.duration("rescueInterval", "5s", Duration.ofMillis(10)),
            d.duration("listenerHealthInterval", "10s", Duration.ofMillis(100)),
            d.duration("heartbeatInterval", "1s", Duration.ofMillis(100)),
            d.duration("leaderInterval", "1s", Duration.ofMillis(50)),
            d.duration("shutdownGrace", "20s", Duration.ofSeconds(1)),
            d.backoff("launchRetry", "500ms", "30s"),
            d.duration("warmInterval", "15s", Duration.ofMillis(100)));
    if (dispatch.warmInterval().compareTo(MAX_WARM_INTERVAL) > 0) {
      d.child("warmInterval")
          .report(
              "must be at most "
                  + Units.format(MAX_WARM_INTERVAL)
                  + ": a schedule period that begins waits no longer than this for its balloons",
              Units.format(dispatch.warmInterval()));
    }

    ConfigNode l = root.object("limits");
    l.allowOnly(
        "maxInputBytes",
        "maxTags",
        "maxLogLineBytes",
        "maxLogBytes",
        "maxStateBytes",
        "maxRequestBytes");
    Limits limits =
        new Limits(
            (int) l.size("maxInputBytes", "1MiB", 1024, 64L << 20),
            l.integer("maxTags", 32, 1, 1000),
            (int) l.size("maxLogLineBytes", "16KiB", 256, 1L << 20),
            l.size("maxLogBytes", "10MiB", 1024, 1L << 40),
            (int) l.size("maxStateBytes", "16MiB", 1024, 1L << 30),
            (int) l.size("maxRequestBytes", "20MiB", 4096, 1L << 30));
    if (limits.maxRequestBytes() < limits.maxInputBytes() + 64 * 1024) {
      l.child("maxRequestBytes")
          .report("must exceed maxInputBytes by at least 64KiB, so that a full input fits");
    }
    if (limits.maxRequestBytes() < limits.maxStateBytes() + 64 * 1024) {
      l.child("maxRequestBytes")
          .report("must exceed maxStateBytes by at least 64KiB, so that a full state fits");
    }

    ConfigNode ln = root.object("launcher");
    ln.allowOnly("kind", "local", "kubernetes");
    String kind = ln.string("kind", "local");
    if (!kind.equals("local") && !kind.equals("kubernetes")) {
      ln.child("kind").report("must be local or kubernetes", kind);
    }
    ConfigNode lo = ln.object("local");
    lo.allowOnly(
        "runDir",
        "javaOptions",
        "command",
        "passEnv",
        "pluginCacheDir",
        "isolation",
        "readOnly",
        "network");
    String runDir = lo.string("runDir", null);
    String cache = lo.string("pluginCacheDir", null);
    String isolation = lo.string("isolation", "auto");
    if (!List.of("auto", "bubblewrap", "none").contains(isolation)) {
      lo.child("isolation")
          .report(
              "must be auto (bubblewrap when it works here), bubblewrap (or no start) or none",
              isolation);
    }
    String network = lo.string("network", "none");
    if (!List.of("none", "host").contains(network)) {
      lo.child("network")
          .report(
              "must be none (each isolated attempt has a network of its own, and the API through a"
                  + " socket) or host (the machine's network, loopback services included)",
              network);
    }
    List<String> readOnly = lo.strings("readOnly", List.of());
    for (int i = 0; i < readOnly.size(); i++) {
      if (!readOnly.get(i).startsWith("/")) {
        lo.child("readOnly").index(i).report("must be an absolute path", readOnly.get(i));
      }
    }
    Local local =
        new Local(
            runDir == null ? null : Path.of(runDir),
            lo.strings("javaOptions", List.of()),
            lo.strings("command", List.of()),
            lo.strings("passEnv", List.of()),
            cache == null ? null : Path.of(cache),
            isolation,
            readOnly,
            network);
    ConfigNode kn = ln.object("kubernetes");
    kn.allowOnly(
        "namespace",
        "templateDir",
        "qps",
        "burst",
        "launchesInFlight",
        "ttlSecondsAfterFinished",
        "requestTimeout",
        "balloonPriorityClass");
    String namespace = kn.string("namespace", "default");
    if (!NAMESPACE.matcher(namespace).matches()) {
      kn.child("namespace").report(NAMESPACE_RULE, namespace);
    }
    OneshotConfig.Kubernetes kubernetes =
        new OneshotConfig.Kubernetes(
            namespace,
            Path.of(kn.string("templateDir", "job-templates")),
            kn.integer("qps", DEFAULT_QPS, 1, 10_000),
            kn.integer("burst", DEFAULT_BURST, 1, 10_000),
            kn.integer("launchesInFlight", DEFAULT_LAUNCHES_IN_FLIGHT, 1, 10_000),
            kn.integer("ttlSecondsAfterFinished", 3600, 0, 30 * 24 * 3600),
            kn.duration("requestTimeout", "30s", Duration.ofSeconds(1)),
            kn.string("balloonPriorityClass", DEFAULT_BALLOON_PRIORITY_CLASS));
    if (!NAMESPACE.matcher(kubernetes.balloonPriorityClass()).matches()) {
      kn.child("balloonPriorityClass")
          .report(
              "must be the name of a PriorityClass: lowercase letters, digits and '-'",
              kubernetes.balloonPriorityClass());
    }
    Launcher launcher = new Launcher(kind, local, kubernetes);
    if (kind.equals("kubernetes") && publicUrl == null) {
      apiNode
          .child("publicUrl")
          .report(
              "is required with launcher.kind kubernetes: the URL pods reach the API at, like"
                  + " http://oneshot.oneshot.svc:8080");
    }

    ConfigNode lg = root.object("logging");
    lg.allowOnly("format", "levels");
    String format = lg.string("format", "text");
    if (!format.equals("text") && !format.equals("json")) {
      lg.child("format").report("must be text or json", format);
    }
    Map<String, String> levels = new LinkedHashMap<>();
    ConfigNode lv = lg.object("levels");
    for (Iterator<String> it = lv.node().fieldNames(); it.hasNext(); ) {
      String name = it.next();
      String level = lv.string(name, null);
      if (level == null
          || !List.of("trace", "debug", "info", "warn", "error", "off")
              .contains(level.toLowerCase())) {
        lv.child(name).report("must be trace, debug, info, warn, error or off", level);
      } else {
        levels.put(name, level);
      }
    }
    OneshotConfig.Logging logging = new OneshotConfig.Logging(format, Map.copyOf(levels));

    ConfigNode rt = root.object("retention");
    rt.allowOnly("age", "count", "interval", "batch");
    OneshotConfig.Retention retention =
        new OneshotConfig.Retention(
            age(rt, null),
            rt.integer("count", 0, 0, 100_000_000),
            rt.duration("interval", "1m", Duration.ofSeconds(1)),
            rt.integer("batch", 500, 1, 100_000));

    List<OneshotConfig.Team> teams = readTeams(root, dispatch);
    List<Route> routes = readRoutes(root, dispatch, retention);
    checkTeams(root, teams, routes);
    for (int i = 0; i < routes.size(); i++) {
      if (!kind.equals("kubernetes") && routes.get(i).pod() != null) {
        root.child("routes")
            .index(i)
            .child("pod")
            .report(
                "needs launcher.kind kubernetes: a build's pod settings are for the Job's pod (the"
                    + " local launcher runs builds as processes here)");
      }
      if (!kind.equals("kubernetes") && routes.get(i).warm().any()) {
        root.child("routes")
            .index(i)
            .child("warm")
            .report(
                "needs launcher.kind kubernetes: warm room is pods of the route's shape held on"
                    + " its nodes (the local launcher runs builds as processes here)");
      }
    }
    if (kind.equals("kubernetes")) {
      for (int i = 0; i < routes.size(); i++) {
        if (routes.get(i).template() == null) {
          root.child("routes")
              .index(i)
              .child("template")
              .report(
                  "is required with launcher.kind kubernetes: a Job template in the template directory");
        }
      }
    }
    List<OneshotConfig.Cluster> clusters = readClusters(root, kubernetes, kind);
    checkRouteClusters(root, routes, clusters);
    List<OneshotConfig.Source> sources = readSources(root, routes, env);
    checkPassEnv(root, routes, local.passEnv(), env);
    routes = coderNetwork(root, routes, sources);
    return new OneshotConfig(
        database,
        api,
        dispatch,
        limits,
        launcher,
        logging,
        retention,
        routes,
        sources,
        readEncryption(root, env),
        teams,
        clusters);
  }

  /** The fields of a cluster. */
  public static final List<String> CLUSTER_FIELDS =
      List.of(
          "name",
          "kubeconfig",
          "context",
          "inCluster",
          "namespace",
          "qps",
          "burst",
          "launchesInFlight",
          "requestTimeout");

  /**
   * The clusters besides the dispatcher's own: each named once (not {@code home}, the dispatcher's
   * own), reached through a kubeconfig file or from inside the cluster, its limits defaulting to
   * {@code launcher.kubernetes}'s. Only for the kubernetes launcher.
   */
  private static List<OneshotConfig.Cluster> readClusters(
      ConfigNode root, OneshotConfig.Kubernetes k, String kind) {
    ConfigNode list = root.child("clusters");
    if (list.absent()) {
      return List.of();
    }
    if (!list.node().isArray()) {
      list.report("must be a list of clusters, like [{name: eu, kubeconfig: /etc/oneshot/eu}]");
      return List.of();
    }
    if (!kind.equals("kubernetes") && !list.node().isEmpty()) {
      list.report(
          "needs launcher.kind kubernetes: clusters are Kubernetes APIs that routes launch Jobs"
              + " into (the local launcher runs builds as processes here)");
      return List.of();
    }
    List<OneshotConfig.Cluster> out = new ArrayList<>();
    for (int i = 0; i < list.node().size(); i++) {
      ConfigNode c = list.index(i).requireObject();
      c.allowOnly(CLUSTER_FIELDS.toArray(String[]::new));
      String name = c.string("name", null);
      if (name == null) {
        c.child("name").report("is required: how routes name the cluster, like eu-west");
      } else if (!ROUTE_NAME.matcher(name).matches()) {
        c.child("name")
            .report(
                "must be 1 to 32 lowercase letters, digits or '-', starting and ending with a"
                    + " letter or digit",
                name);
      } else if (name.equals(OneshotConfig.HOME)) {
        c.child("name")
            .report(
                "home is the dispatcher's own cluster (launcher.kubernetes); name the others",
                name);
      }
      for (int j = 0; j < out.size(); j++) {
        if (name != null && name.equals(out.get(j).name())) {
          c.child("name").report("duplicate cluster '" + name + "' (also clusters[" + j + "])");
        }
      }
      String kubeconfig = c.string("kubeconfig", null);
      boolean inCluster = c.bool("inCluster", false);
      if ((kubeconfig == null) == !inCluster) {
        c.report(
            kubeconfig == null
                ? "needs kubeconfig (a file, like a Secret mounted by the chart) or inCluster: true"
                : "has both kubeconfig and inCluster: give one");
      }
      String ns = c.string("namespace", k.namespace());
      if (!NAMESPACE.matcher(ns).matches()) {
        c.child("namespace").report(NAMESPACE_RULE, ns);
      }
      String context = c.string("context", null);
      if (context != null && inCluster) {
        c.child("context").report("is for a kubeconfig; inCluster has none", context);
      }
      out.add(
          new OneshotConfig.Cluster(
              name,
              kubeconfig == null ? null : Path.of(kubeconfig),
              context,
              inCluster,
              ns,
              c.integer("qps", (int) k.qps(), 1, 10_000),
              c.integer("burst", k.burst(), 1, 10_000),
              c.integer("launchesInFlight", k.launchesInFlight(), 1, 10_000),
              c.child("requestTimeout").absent()
                  ? k.requestTimeout()
                  : c.duration("requestTimeout", "30s", Duration.ofSeconds(1))));
    }
    return List.copyOf(out);
  }

  /** Each route's cluster is the dispatcher's own or one of {@code clusters}. */
  private static void checkRouteClusters(
      ConfigNode root, List<Route> routes, List<OneshotConfig.Cluster> clusters) {
    for (int i = 0; i < routes.size(); i++) {
      String cluster = routes.get(i).cluster();
      if (cluster.equals(OneshotConfig.HOME)
          || clusters.stream().anyMatch(c -> c.name().equals(cluster))) {
        continue;
      }
      List<String> known = new ArrayList<>(List.of(OneshotConfig.HOME));
      clusters.forEach(c -> known.add(c.name()));
      root.child("routes")
          .index(i)
          .child("cluster")
          .report("names no cluster; clusters: " + String.join(", ", known), cluster);
    }
  }

  /** The fields of a team. */
  public static final List<String> TEAM_FIELDS =
      List.of("name", "weight", "guaranteed", "borrowLimit", "maxConcurrent");

  /** The configured teams (routes that name none are teams of their own). */
  private static List<OneshotConfig.Team> readTeams(ConfigNode root, Dispatch dispatch) {
    ConfigNode list = root.child("teams");
    if (list.absent()) {
      return List.of();
    }
    if (!list.node().isArray()) {
      list.report(
          "must be a list of teams like {name: platform, weight: 2, guaranteed: 4, borrowLimit: 10}",
          list.node());
      return List.of();
    }
    List<OneshotConfig.Team> teams = new ArrayList<>();
    int guaranteed = 0;
    for (int i = 0; i < list.node().size(); i++) {
      ConfigNode t = list.index(i).requireObject();
      t.allowOnly(TEAM_FIELDS.toArray(String[]::new));
      String name = t.string("name", null);
      if (name == null) {
        t.child("name").report("is required");
        continue;
      }
      if (!ROUTE_NAME.matcher(name).matches()) {
        t.child("name")
            .report(
                "must be 1 to 32 lowercase letters, digits or '-', starting and ending with a"
                    + " letter or digit",
                name);
      }
      for (int j = 0; j < teams.size(); j++) {
        if (name.equals(teams.get(j).name())) {
          t.child("name").report("duplicate team '" + name + "' (also teams[" + j + "])");
        }
      }
      OneshotConfig.Team team =
          new OneshotConfig.Team(
              name,
              t.integer("weight", 1, 1, 1000),
              t.integer("guaranteed", 0, 0, 100_000),
              t.child("borrowLimit").absent() ? null : t.integer("borrowLimit", 0, 0, 100_000),
              t.child("maxConcurrent").absent() ? null : t.integer("maxConcurrent", 0, 0, 100_000));
      guaranteed += team.guaranteed();
      teams.add(team);
    }
    if (guaranteed > dispatch.maxConcurrent()) {
      list.report(
          "guarantee "
              + guaranteed
              + " slots together, more than dispatch.maxConcurrent ("
              + dispatch.maxConcurrent()
              + "): a guarantee must be one the global limit can keep");
    }
    return List.copyOf(teams);
  }

  /**
   * Every team a route names exists, every team has a route, and no team takes the name of a route
   * that is not in it (a route that names no team is a team of that name).
   */
  private static void checkTeams(
      ConfigNode root, List<OneshotConfig.Team> teams, List<Route> routes) {
    java.util.Set<String> names = new java.util.HashSet<>();
    teams.forEach(t -> names.add(t.name()));
    for (int i = 0; i < routes.size(); i++) {
      Route r = routes.get(i);
      if (r.team() != null && !names.contains(r.team())) {
        root.child("routes")
            .index(i)
            .child("team")
            .report(
                "names no team in teams"
                    + (names.isEmpty()
                        ? ""
                        : " (" + String.join(", ", new java.util.TreeSet<>(names)) + ")"),
                r.team());
      }
    }
    for (int i = 0; i < teams.size(); i++) {
      String t = teams.get(i).name();
      Route same = routes.stream().filter(r -> r.name().equals(t)).findFirst().orElse(null);
      if (same != null && !t.equals(same.team())) {
        root.child("teams")
            .index(i)
            .child("name")
            .report(
                "route "
                    + t
                    + (same.team() == null
                        ? " names no team, so it is a team of its own of that name"
                        : " is in team " + same.team())
                    + ": give this team another name, or put the route in it (team: "
                    + t
                    + ")");
      } else if (routes.stream().noneMatch(r -> t.equals(r.team()))) {
        root.child("teams").index(i).child("name").report("no route names team " + t);
      }
    }
  }

  /** Where the encryption keys come from when they are not in the file. */
  public static final String ENV_ENCRYPTION_KEYS = "ONESHOT_ENCRYPTION_KEYS";

  /**
   * {@code encryption.keys} ({@code [{id, secret}]}), {@code encryption.keysFile} or {@code
   * ONESHOT_ENCRYPTION_KEYS} (which wins): the latter two hold {@code id=secret} entries, one per
   * line or separated by commas, the sealing key first.
   */
  private static OneshotConfig.Encryption readEncryption(ConfigNode root, Map<String, String> env) {
    ConfigNode e = root.object("encryption");
    e.allowOnly("keys", "keysFile");
    List<OneshotConfig.Key> keys = new ArrayList<>();
    ConfigNode listed = e.child("keys");
    String file = e.string("keysFile", null);
    if (!listed.absent() && file != null) {
      e.child("keysFile").report("give keys or keysFile, not both");
    }
    if (env.containsKey(ENV_ENCRYPTION_KEYS)) {
      keys.addAll(parseKeys(env.get(ENV_ENCRYPTION_KEYS), e.child("keys"), ENV_ENCRYPTION_KEYS));
    } else if (file != null) {
      try {
        keys.addAll(parseKeys(Files.readString(Path.of(file)), e.child("keysFile"), file));
      } catch (IOException x) {
        e.child("keysFile").report("cannot be read: " + x.getMessage());
      }
    } else if (!listed.absent()) {
      if (!listed.node().isArray()) {
        listed.report("must be a list of {id, secret}", listed.node());
      } else {
        for (int i = 0; i < listed.node().size(); i++) {
          ConfigNode k = listed.index(i).requireObject();
          k.allowOnly("id", "secret");
          String id = k.string("id", null);
          String secret = k.string("secret", null);
          if (id == null || secret == null) {
            k.report("needs an id and a secret");
          } else {
            checkKey(id, secret, k).ifPresent(keys::add);
          }
        }
      }
    }
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (OneshotConfig.Key k : keys) {
      if (!seen.add(k.id())) {
        e.child("keys").report("key id " + k.id() + " is given twice");
      }
    }
    return new OneshotConfig.Encryption(List.copyOf(keys));
  }

  private static List<OneshotConfig.Key> parseKeys(String text, ConfigNode at, String where) {
    List<OneshotConfig.Key> out = new ArrayList<>();
    for (String entry : text.split("[,\\n]")) {
      String t = entry.strip();
      if (t.isEmpty() || t.startsWith("#")) {
        continue;
      }
      int eq = t.indexOf('=');
      if (eq <= 0) {
        at.report("each key in " + where + " is id=secret; one is not");
        continue;
      }
      checkKey(t.substring(0, eq).strip(), t.substring(eq + 1).strip(), at).ifPresent(out::add);
    }
    if (out.isEmpty()) {
      at.report(where + " holds no key");
    }
    return out;
  }

  private static java.util.Optional<OneshotConfig.Key> checkKey(
      String id, String secret, ConfigNode at) {
    if (!id.matches("[A-Za-z0-9._-]{1,64}")) {
      at.report("key id " + id + ": letters, digits, '.', '_' and '-', at most 64");
      return java.util.Optional.empty();
    }
    if (secret.length() < 32) {
      at.report(
          "key "
              + id
              + ": the secret must be at least 32 characters (say, openssl rand -base64 32)");
      return java.util.Optional.empty();
    }
    return java.util.Optional.of(new OneshotConfig.Key(id, secret));
  }

  /** The fields a source may have. */
  public static final List<String> SOURCE_FIELDS =
      List.of(
          "name",
          "kind",
          "databaseUrl",
          "databaseUrlEnv",
          "channel",
          "query",
          "input",
          "pollInterval",
          "failureHold",
          "idleTimeout",
          "routes");

  /** Coder's NOTIFY channel for a queued provisioner job (see source/CoderSource). */
  public static final String CODER_CHANNEL = "provisioner_job_posted";

  static final Pattern CHANNEL = Pattern.compile("^[a-z_][a-z0-9_]{0,62}$");
  private static final Pattern ENV_NAME = Pattern.compile("^[A-Za-z_][A-Za-z0-9_]*$");

  private static List<OneshotConfig.Source> readSources(
      ConfigNode root, List<Route> routes, Map<String, String> env) {
    ConfigNode list = root.child("sources");
    if (list.absent()) {
      return List.of();
    }
    if (!list.node().isArray()) {
      list.report("must be a list of sources");
      return List.of();
    }
    List<OneshotConfig.Source> out = new ArrayList<>();
    for (int i = 0; i < list.node().size(); i++) {
      ConfigNode s = list.index(i).requireObject();
      s.allowOnly(SOURCE_FIELDS.toArray(String[]::new));
      String name = s.string("name", null);
      if (name == null) {
        s.child("name").report("is required");
      } else if (!ROUTE_NAME.matcher(name).matches()) {
        s.child("name")
            .report(
                "must be 1 to 32 lowercase letters, digits or '-', starting and ending with a"
                    + " letter or digit",
                name);
      }
      for (int j = 0; j < out.size(); j++) {
        if (name != null && name.equals(out.get(j).name())) {
          s.child("name").report("duplicate source '" + name + "' (also sources[" + j + "])");
        }
      }
      String kind = s.string("kind", null);
      if (kind == null) {
        s.child("kind").report("is required: postgres or coder");
        kind = OneshotConfig.Source.POSTGRES;
      } else if (!kind.equals(OneshotConfig.Source.POSTGRES)
          && !kind.equals(OneshotConfig.Source.CODER)) {
        s.child("kind").report("must be postgres or coder", kind);
        kind = OneshotConfig.Source.POSTGRES;
      }
      boolean coder = kind.equals(OneshotConfig.Source.CODER);
      String url = s.string("databaseUrl", null);
      String urlEnv = s.string("databaseUrlEnv", null);
      if (url != null && urlEnv != null) {
        s.child("databaseUrlEnv").report("give databaseUrl or databaseUrlEnv, not both");
      } else if (urlEnv != null) {
        if (!ENV_NAME.matcher(urlEnv).matches()) {
          s.child("databaseUrlEnv").report("must name an environment variable", urlEnv);
        } else if (env.get(urlEnv) == null || env.get(urlEnv).isBlank()) {
          s.child("databaseUrlEnv")
              .report("names " + urlEnv + ", which is not set in the dispatcher's environment");
        } else {
          url = env.get(urlEnv);
        }
      } else if (url == null) {
        s.child("databaseUrl")
            .report(
                "is required (or databaseUrlEnv): the database whose jobs this source watches,"
                    + " like postgresql://oneshot_reader@coder-db:5432/coder");
      }
      if (url != null && !url.matches("^postgres(ql)?://.+")) {
        s.child(urlEnv != null ? "databaseUrlEnv" : "databaseUrl")
            .report("must be a postgresql:// URL (the value is not shown: it may hold a password)");
      }
      String channel = s.string("channel", coder ? CODER_CHANNEL : null);
      String query = s.string("query", null);
      String input = null;
      if (coder) {
        for (String f : List.of("query", "input")) {
          if (!s.child(f).absent()) {
            s.child(f).report("is fixed for kind coder (Coder's table and the coder provisioner)");
          }
        }
        if (!channel.equals(CODER_CHANNEL)) {
          s.child("channel").report("is fixed for kind coder: " + CODER_CHANNEL, channel);
        }
      } else {
        if (channel == null) {
          s.child("channel")
              .report("is required for kind postgres: the channel producers NOTIFY when jobs wait");
        } else if (!CHANNEL.matcher(channel).matches()) {
          s.child("channel")
              .report(
                  "must be a lowercase PostgreSQL identifier: letters, digits and '_', not"
                      + " starting with a digit",
                  channel);
        }
        if (query == null || query.isBlank()) {
          s.child("query")
              .report(
                  "is required for kind postgres: a read-only query returning tags (a JSON object)"
                      + " and waiting (a count), one row per tag set");
        }
        ConfigNode in = s.child("input");
        if (in.absent()) {
          s.child("input")
              .report(
                  "is required for kind postgres: the input of each build, like {provisioner:"
                      + " script, command: [./take-one-job]}");
        } else if (!in.node().isObject()) {
          in.report("must be an object, a build's input", in.node());
        } else {
          input = in.node().toString();
        }
      }
      Duration poll = s.duration("pollInterval", "5s", Duration.ofMillis(100));
      Duration hold = s.duration("failureHold", "1m", Duration.ZERO);
      Duration idle = s.duration("idleTimeout", "2m", Duration.ofSeconds(1));
      if (!coder && !s.child("idleTimeout").absent()) {
        s.child("idleTimeout").report("is only for kind coder (its daemons wait for a job)");
      }
      List<OneshotConfig.Feed> feeds = feeds(s, coder, routes);
      out.add(
          new OneshotConfig.Source(
              name, kind, url, channel, coder ? null : query, poll, feeds, input, hold, idle));
    }
    return List.copyOf(out);
  }

  /** A source's routes: names, or {route, organization} for a coder source. */
  private static List<OneshotConfig.Feed> feeds(ConfigNode s, boolean coder, List<Route> routes) {
    ConfigNode list = s.child("routes");
    if (list.absent() || !list.node().isArray() || list.node().isEmpty()) {
      list.report(
          coder
              ? "is required: the routes this source feeds, like [{route: coder, organization:"
                  + " coder}], one per provisioner key"
              : "is required: the routes this source feeds, like [reports]");
      return List.of();
    }
    List<OneshotConfig.Feed> out = new ArrayList<>();
    for (int i = 0; i < list.node().size(); i++) {
      ConfigNode f = list.index(i);
      String route;
      String org = null;
      if (f.node().isTextual()) {
        route = f.node().asText();
        if (coder) {
          f.report(
              "must be {route, organization} for kind coder: a provisioner key belongs to one"
                  + " organization",
              route);
        }
      } else if (f.node().isObject()) {
        f.allowOnly("route", "organization");
        route = f.string("route", null);
        org = f.string("organization", null);
        if (route == null) {
          f.child("route").report("is required");
        }
        if (coder && org == null) {
          f.child("organization")
              .report("is required for kind coder: the Coder organization's name or id");
        } else if (!coder && org != null) {
          f.child("organization").report("is only for kind coder");
        }
      } else {
        f.report("must be a route name or {route, organization}", f.node());
        continue;
      }
      if (route != null && routes.stream().noneMatch(r -> r.name().equals(route))) {
        f.report(
            "names no route; routes: "
                + String.join(", ", routes.stream().map(Route::name).toList()),
            route);
      }
      out.add(new OneshotConfig.Feed(route, org));
    }
    return List.copyOf(out);
  }

  /**
   * A route a Coder source feeds runs Coder's provisioner daemon, which must reach Coder: its
   * isolated local attempts get the machine's network ({@code network: host}) unless the route says
   * otherwise, and saying {@code none} is refused, since no such build could take its job.
   */
  private static List<Route> coderNetwork(
      ConfigNode root, List<Route> routes, List<OneshotConfig.Source> sources) {
    java.util.Set<String> coder = new java.util.HashSet<>();
    for (OneshotConfig.Source src : sources) {
      if (src.coder()) {
        src.feeds().forEach(f -> coder.add(f.route()));
      }
    }
    List<Route> out = new ArrayList<>();
    for (int i = 0; i < routes.size(); i++) {
      Route r = routes.get(i);
      if (coder.contains(r.name()) && "none".equals(r.network())) {
        root.child("routes")
            .index(i)
            .child("network")
            .report(
                "cannot be none on a route a Coder source feeds: its provisioner daemon must reach"
                    + " Coder (use host)",
                "none");
      }
      String network = coder.contains(r.name()) && r.network() == null ? "host" : r.network();
      out.add(r.withNetwork(network));
    }
    return List.copyOf(out);
  }

  /** A list of environment variable names ({@code passEnv}), each checked. */
  private static List<String> envNames(ConfigNode node) {
    List<String> names = node.strings("passEnv", List.of());
    for (int i = 0; i < names.size(); i++) {
      if (!ENV_NAME.matcher(names.get(i)).matches()) {
        node.child("passEnv").index(i).report("must name an environment variable", names.get(i));
      }
    }
    return names;
  }

  /**
   * What a build's environment must never get from the dispatcher's unless the one route it belongs
   * to names it: the dispatcher's own secrets (no route may), a source's database URL (no route
   * may), a route's own Coder key (that route alone). {@code launcher.local.passEnv} reaches every
   * route's builds, so it may name none of these; {@code routes[].passEnv} only its own key.
   */
  private static void checkPassEnv(
      ConfigNode root, List<Route> routes, List<String> everyRoute, Map<String, String> env) {
    Map<String, String> owner = new LinkedHashMap<>();
    for (Route r : routes) {
      if (r.name() != null) {
        owner.put(Route.coderKeyVariable(r.name()), r.name());
      }
    }
    java.util.Set<String> secret =
        new java.util.HashSet<>(List.of(ENV_DATABASE_URL, ENV_ADMIN_TOKEN, ENV_ENCRYPTION_KEYS));
    ConfigNode sources = root.child("sources");
    if (!sources.absent() && sources.node().isArray()) {
      for (int i = 0; i < sources.node().size(); i++) {
        String urlEnv = sources.node().get(i).path("databaseUrlEnv").asText(null);
        if (urlEnv != null) {
          secret.add(urlEnv);
        }
      }
    }
    ConfigNode shared = root.child("launcher").child("local").child("passEnv");
    for (int i = 0; i < everyRoute.size(); i++) {
      String name = everyRoute.get(i);
      if (secret.contains(name)) {
        shared.index(i).report("is one of the dispatcher's own secrets: no build may get it", name);
      } else if (owner.containsKey(name) || name.startsWith("CODER_PROVISIONER_DAEMON_KEY")) {
        shared
            .index(i)
            .report(
                owner.containsKey(name)
                    ? "is route "
                        + owner.get(name)
                        + "'s Coder key, and this list reaches every route's builds: name it in"
                        + " that route's passEnv"
                    : "is a Coder key, and this list reaches every route's builds: name a"
                        + " route's own key ("
                        + CODER_KEY_PREFIX
                        + "<ROUTE>) in that route's passEnv",
                name);
      }
    }
    ConfigNode list = root.child("routes");
    for (int i = 0; i < routes.size(); i++) {
      Route r = routes.get(i);
      List<String> names = r.passEnv();
      for (int j = 0; j < names.size(); j++) {
        String name = names.get(j);
        String of = owner.get(name);
        ConfigNode at = list.index(i).child("passEnv").index(j);
        if (secret.contains(name)) {
          at.report("is one of the dispatcher's own secrets: no build may get it", name);
        } else if (of != null && !of.equals(r.name())) {
          at.report("is route " + of + "'s Coder key: only that route's builds may get it", name);
        }
      }
    }
  }

  private static final String CODER_KEY_PREFIX = "CODER_PROVISIONER_DAEMON_KEY_";

  /** A retention age: a duration of at least a minute, or {@code forever} (the fallback: null). */
  private static Duration age(ConfigNode node, Duration fallback) {
    ConfigNode c = node.child("age");
    if (c.absent()) {
      return fallback;
    }
    if (c.node().isTextual() && c.node().asText().equals("forever")) {
      return null;
    }
    return node.duration("age", "1m", Duration.ofMinutes(1));
  }

  private static List<Route> readRoutes(
      ConfigNode root, Dispatch dispatch, OneshotConfig.Retention retention) {
    ConfigNode list = root.child("routes");
    if (list.node().isMissingNode() || list.node().isNull()) {
      list.report("at least one route is required");
      return List.of();
    }
    if (!list.node().isArray() || list.node().isEmpty()) {
      list.report("must be a non-empty list of routes");
      return List.of();
    }
    List<Route> routes = new ArrayList<>();
    for (int i = 0; i < list.node().size(); i++) {
      ConfigNode r = list.index(i).requireObject();
      r.allowOnly(ROUTE_FIELDS.toArray(String[]::new));
      String name = r.string("name", null);
      if (name == null) {
        r.child("name").report("is required");
      } else if (!ROUTE_NAME.matcher(name).matches()) {
        r.child("name")
            .report(
                "must be 1 to 32 lowercase letters, digits or '-', starting and ending with a"
                    + " letter or digit",
                name);
      }
      for (int j = 0; j < routes.size(); j++) {
        if (name != null && name.equals(routes.get(j).name())) {
          r.child("name").report("duplicate route '" + name + "' (also routes[" + j + "])");
        }
      }
      int before = r.problems().size();
      Map<String, String> tags = r.tags("tags");
      // Tags that were refused are missing from the map: comparing it would report a false overlap.
      boolean tagsRead = r.problems().size() == before;
      boolean untagged = r.bool("untagged", tags.isEmpty());
      if (tagsRead) {
        neverMatches(r, name, tags, untagged, routes);
      }
      String ns = r.string("namespace", null);
      if (ns != null && !NAMESPACE.matcher(ns).matches()) {
        r.child("namespace").report(NAMESPACE_RULE, ns);
      }
      Duration hang = r.duration("hangTimeout", "2m", Duration.ofSeconds(1));
      Duration lease = lease(r, hang, dispatch.heartbeatInterval());
      Duration cancelGrace = r.duration("cancelGrace", "60s", Duration.ZERO);
      // Less than the cancel grace and its margin would kill terraform on a cancel before it
      // writes its state, as the templates' own terminationGracePeriodSeconds may not either.
      Duration drainGrace =
          r.child("drainGrace").absent()
              ? null
              : r.duration("drainGrace", "1h", cancelGrace.plus(OneshotConfig.Route.GRACE_MARGIN));
      String network = r.string("network", null);
      if (network != null && !List.of("none", "host").contains(network)) {
        r.child("network")
            .report(
                "must be none (a network of the attempt's own, the API through a socket) or host"
                    + " (the machine's network: what a build that reaches a cloud or Coder needs)",
                network);
      }
      int maxConcurrent = r.integer("maxConcurrent", 10, 0, 100_000);
      OneshotConfig.Retention routeRetention = routeRetention(r, retention);
      routes.add(
          new Route(
              name,
              tags,
              r.string("template", null),
              ns,
              maxConcurrent,
              r.duration("timeout", "1h", Duration.ofSeconds(1)),
              r.duration("launchTimeout", "5m", Duration.ofSeconds(1)),
              hang,
              lease,
              cancelGrace,
              r.integer("maxAttempts", 3, 1, 100),
              r.bool("retryAfterAcquire", false),
              untagged,
              routeRetention,
              drainGrace,
              envNames(r),
              network,
              warm(r, maxConcurrent, routeRetention),
              pod(r),
              r.string("team", null),
              r.string("cluster", OneshotConfig.HOME)));
    }
    return List.copyOf(routes);
  }

  /** The fields of a route's {@code pod}. */
  public static final List<String> POD_FIELDS =
      List.of(
          "overLimit",
          "maxRequests",
          "maxLimits",
          "images",
          "nodeSelector",
          "tolerations",
          "labels",
          "annotations",
          "serviceAccounts");

  private static final Pattern RESOURCE_NAME =
      Pattern.compile("^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$");

  private static final Pattern ACCOUNT =
      Pattern.compile("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");

  /** What a route's builds may ask for their own pod; null without {@code pod}. */
  private static OneshotConfig.PodRules pod(ConfigNode r) {
    ConfigNode p = r.child("pod");
    if (p.absent()) {
      return null;
    }
    p = p.requireObject();
    p.allowOnly(POD_FIELDS.toArray(String[]::new));
    String overLimit = p.string("overLimit", OneshotConfig.PodRules.CLAMP);
    if (!List.of(OneshotConfig.PodRules.CLAMP, OneshotConfig.PodRules.REFUSE).contains(overLimit)) {
      p.child("overLimit")
          .report(
              "must be clamp (a size over the maximum is lowered to it, with a note) or refuse (the"
                  + " build is refused at enqueue)",
              overLimit);
    }
    return new OneshotConfig.PodRules(
        overLimit,
        quantities(p.child("maxRequests")),
        quantities(p.child("maxLimits")),
        globs(p.child("images")),
        globMap(p.child("nodeSelector")),
        globs(p.child("tolerations")),
        globMap(p.child("labels")),
        globMap(p.child("annotations")),
        accounts(p.child("serviceAccounts")));
  }

  /** Resource names to quantities ({cpu: 2, memory: 4Gi}). */
  private static Map<String, String> quantities(ConfigNode c) {
    if (c.absent()) {
      return Map.of();
    }
    if (!c.node().isObject()) {
      c.report(
          "must be a mapping of resource names to quantities, like {cpu: 2, memory: 4Gi}",
          c.node());
      return Map.of();
    }
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : c.node().properties()) {
      ConfigNode v = c.child(e.getKey());
      if (!RESOURCE_NAME.matcher(e.getKey()).matches()) {
        v.report("is not a resource name like cpu, memory, ephemeral-storage or nvidia.com/gpu");
        continue;
      }
      String q = e.getValue().isValueNode() ? e.getValue().asText() : null;
      if (Quantities.parse(q) == null) {
        v.report("must be a quantity like 500m, 2, 512Mi or 4Gi", e.getValue());
        continue;
      }
      out.put(e.getKey(), q);
    }
    return Map.copyOf(out);
  }

  /** A list of globs (a single string is a list of one). */
  private static List<String> globs(ConfigNode c) {
    if (c.absent()) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    if (c.node().isTextual()) {
      out.add(c.node().asText());
    } else if (c.node().isArray()) {
      for (int i = 0; i < c.node().size(); i++) {
        JsonNode e = c.node().get(i);
        if (!e.isTextual() || e.asText().isEmpty() || e.asText().matches(".*\\s.*")) {
          c.index(i).report("must be a pattern without spaces, like ghcr.io/acme/* ", e);
        } else {
          out.add(e.asText());
        }
      }
    } else {
      c.report("must be a list of patterns", c.node());
    }
    return List.copyOf(out);
  }

  /** Key patterns to the value patterns allowed with them ({pool: [gpu, "cpu-*"]}). */
  private static Map<String, List<String>> globMap(ConfigNode c) {
    if (c.absent()) {
      return Map.of();
    }
    if (!c.node().isObject()) {
      c.report(
          "must be a mapping of key patterns to the value patterns allowed, like {pool: [gpu, \"cpu-*\"]}",
          c.node());
      return Map.of();
    }
    Map<String, List<String>> out = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : c.node().properties()) {
      ConfigNode v = c.child(e.getKey());
      String prefix =
          e.getKey().contains("/") ? e.getKey().substring(0, e.getKey().indexOf('/')) : "";
      if (prefix.matches("(.*\\.)?(oneshot\\.io|kubernetes\\.io|k8s\\.io)")) {
        v.report(
            "keys under "
                + prefix
                + "/ are "
                + (prefix.endsWith("oneshot.io")
                    ? "oneshot's own (a build's identity)"
                    : "reserved by Kubernetes")
                + ": no build may set them");
        continue;
      }
      out.put(e.getKey(), globs(v));
    }
    return Map.copyOf(out);
  }

  /** Names of ServiceAccounts of the route's namespace. */
  private static List<String> accounts(ConfigNode c) {
    if (c.absent()) {
      return List.of();
    }
    if (!c.node().isArray()) {
      c.report("must be a list of ServiceAccount names", c.node());
      return List.of();
    }
    List<String> out = new ArrayList<>();
    for (int i = 0; i < c.node().size(); i++) {
      JsonNode e = c.node().get(i);
      if (!e.isTextual() || e.asText().length() > 253 || !ACCOUNT.matcher(e.asText()).matches()) {
        c.index(i)
            .report("must be a ServiceAccount's name: lowercase letters, digits, '-' and '.'", e);
      } else {
        out.add(e.asText());
      }
    }
    return List.copyOf(out);
  }

  /** The most {@code dispatch.warmInterval} may be: the leader counts balloons this often. */
  static final Duration MAX_WARM_INTERVAL = Duration.ofSeconds(30);

  /** The PriorityClass balloons run at unless the launcher names another (the chart's). */
  public static final String DEFAULT_BALLOON_PRIORITY_CLASS = "oneshot-balloon";

  /** The fields of a route's {@code warm}. */
  public static final List<String> WARM_FIELDS =
      List.of("idle", "schedule", "scaleFactor", "forecast", "max", "command");

  /** A route's warm room; {@link OneshotConfig.Warm#NONE} without {@code warm}. */
  private static OneshotConfig.Warm warm(
      ConfigNode r, int maxConcurrent, OneshotConfig.Retention retention) {
    ConfigNode w = r.child("warm");
    if (w.absent()) {
      return OneshotConfig.Warm.NONE;
    }
    w = w.requireObject();
    w.allowOnly(WARM_FIELDS.toArray(String[]::new));
    int idle = w.integer("idle", 0, 0, 10_000);
    double scaleFactor = w.number("scaleFactor", 0, 0, 100);
    Integer max = w.child("max").absent() ? null : w.integer("max", 0, 0, 10_000);
    List<OneshotConfig.Period> schedule = new ArrayList<>();
    ConfigNode list = w.child("schedule");
    if (!list.absent() && !list.node().isArray()) {
      list.report(
          "must be a list of periods like {cron: \"30 8 * * 1-5\", length: 90m,"
              + " timeZone: Europe/Berlin, balloons: 10}",
          list.node());
    } else if (!list.absent()) {
      for (int i = 0; i < list.node().size(); i++) {
        ConfigNode p = list.index(i).requireObject();
        p.allowOnly("cron", "length", "timeZone", "balloons");
        String cron = p.string("cron", null);
        if (cron == null) {
          p.child("cron").report("is required: when the period starts, like \"30 8 * * 1-5\"");
        } else {
          try {
            Crons.parse(cron);
          } catch (IllegalArgumentException e) {
            p.child("cron")
                .report(
                    "must be a cron expression of five fields (minute hour day-of-month month"
                        + " day-of-week): "
                        + e.getMessage(),
                    cron);
            cron = null;
          }
        }
        if (p.child("length").absent()) {
          p.child("length").report("is required: how long the period lasts, like 90m");
        }
        Duration length = p.duration("length", "1h", Duration.ofMinutes(1));
        if (length.compareTo(Duration.ofDays(7)) > 0) {
          p.child("length").report("must be at most 168h (a week)", Units.format(length));
        }
        String zone = p.string("timeZone", "UTC");
        java.time.ZoneId zoneId = java.time.ZoneOffset.UTC;
        try {
          zoneId = java.time.ZoneId.of(zone);
        } catch (java.time.DateTimeException e) {
          p.child("timeZone")
              .report("must be a time zone of the tz database, like Europe/Berlin or UTC", zone);
        }
        if (p.child("balloons").absent()) {
          p.child("balloons").report("is required: how many balloons the period keeps");
        }
        int balloons = p.integer("balloons", 0, 0, 10_000);
        if (cron != null) {
          schedule.add(new OneshotConfig.Period(cron, length, zoneId, balloons));
        }
      }
    }
    OneshotConfig.Forecast forecast = null;
    if (!w.child("forecast").absent()) {
      ConfigNode f = w.object("forecast");
      f.allowOnly("weeks", "percentile", "ahead");
      forecast =
          new OneshotConfig.Forecast(
              f.integer("weeks", 4, 1, 52),
              f.integer("percentile", 75, 1, 100),
              f.duration("ahead", "15m", Duration.ofMinutes(1)));
      if (forecast.ahead().compareTo(Duration.ofDays(1)) > 0) {
        f.child("ahead").report("must be at most 24h", Units.format(forecast.ahead()));
      }
      // The forecast reads the route's finished builds: retention must keep the weeks it reads.
      Duration needed = Duration.ofDays(7L * forecast.weeks()).plus(forecast.ahead());
      if (retention.age() != null && retention.age().compareTo(needed) < 0) {
        f.child("weeks")
            .report(
                "reads "
                    + forecast.weeks()
                    + " weeks of the route's builds, but retention.age keeps "
                    + Units.format(retention.age())
                    + ": keep at least "
                    + Units.format(needed)
                    + " (the route's own retention, or the top-level one), or read fewer weeks");
      }
    }
    if (max != null && max > maxConcurrent) {
      w.child("max")
          .report(
              "must not exceed the route's maxConcurrent ("
                  + maxConcurrent
                  + "): a balloon is room for a build the route could start",
              w.child("max").node());
    }
    List<String> command = w.strings("command", OneshotConfig.Warm.DEFAULT_COMMAND);
    if (command.isEmpty()) {
      w.child("command").report("must name a program: what a balloon runs");
    }
    return new OneshotConfig.Warm(idle, List.copyOf(schedule), scaleFactor, forecast, max, command);
  }

  /**
   * Reports a route no build can reach. A tagged build goes to the first route whose tags contain
   * all of its tags, so a route whose tags an earlier route's contain gets none; an untagged build
   * goes to the first route that takes untagged builds.
   */
  private static void neverMatches(
      ConfigNode r, String name, Map<String, String> tags, boolean untagged, List<Route> earlier) {
    Route shadow = null;
    int shadowIndex = -1;
    Route firstUntagged = null;
    int firstUntaggedIndex = -1;
    for (int j = 0; j < earlier.size(); j++) {
      Route e = earlier.get(j);
      if (shadow == null && e.tags().entrySet().containsAll(tags.entrySet())) {
        shadow = e;
        shadowIndex = j;
      }
      if (firstUntagged == null && e.untagged()) {
        firstUntagged = e;
        firstUntaggedIndex = j;
      }
    }
    boolean takesTagged = !tags.isEmpty() && shadow == null;
    boolean takesUntagged = untagged && firstUntagged == null;
    if (takesTagged || takesUntagged) {
      return;
    }
    String route = "route '" + name + "' can never match: ";
    if (tags.isEmpty() && !untagged) {
      r.child("untagged")
          .report(route + "a route without tags takes only untagged builds; set untagged: true");
    } else if (tags.isEmpty()) {
      r.child("tags")
          .report(
              route
                  + "untagged builds go to routes["
                  + firstUntaggedIndex
                  + "] '"
                  + firstUntagged.name()
                  + "' first, which takes them (untagged: true); move this route up, or give it"
                  + " tags");
    } else {
      r.child("tags")
          .report(
              route
                  + "every build it could take goes to routes["
                  + shadowIndex
                  + "] '"
                  + shadow.name()
                  + "' first, whose tags contain all of this route's tags; give it a tag"
                  + " the earlier route lacks, or move it up");
    }
  }

  /**
   * A route's retention: the top-level one, with the route's own age and count where it sets them.
   */
  private static OneshotConfig.Retention routeRetention(ConfigNode r, OneshotConfig.Retention top) {
    ConfigNode rr = r.object("retention");
    rr.allowOnly("age", "count");
    return new OneshotConfig.Retention(
        age(rr, top.age()),
        rr.integer("count", top.count(), 0, 100_000_000),
        top.interval(),
        top.batch());
  }

  /** A route's runner lease when it sets none: 30 s, or half its hang timeout when shorter. */
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);

  /**
   * How long a runner goes on without an accepted heartbeat before it stops its provisioner:
   * shorter than the hang timeout (the dispatcher's limit), and at least two heartbeats long.
   */
  private static Duration lease(ConfigNode r, Duration hang, Duration heartbeat) {
    Duration half = hang.dividedBy(2);
    Duration fallback = DEFAULT_LEASE.compareTo(half) < 0 ? DEFAULT_LEASE : half;
    Duration lease = r.duration("lease", Units.format(fallback), Duration.ofMillis(200));
    if (lease.compareTo(hang) >= 0) {
      r.child("lease")
          .report(
              "must be shorter than hangTimeout ("
                  + Units.format(hang)
                  + "): a runner stops itself before the dispatcher gives up on it",
              Units.format(lease));
    }
    if (lease.compareTo(heartbeat.multipliedBy(2)) < 0) {
      r.child("lease")
          .report(
              "must be at least two heartbeats (dispatch.heartbeatInterval is "
                  + Units.format(heartbeat)
                  + "), so that one lost heartbeat does not stop a build",
              Units.format(lease));
    }
    return lease;
  }
}
