package io.oneshot.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.oneshot.api.Json;
import io.oneshot.build.PulumiCheckpoint;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A test-only {@code pulumi} executable: the commands oneshot's pulumi provisioner runs, with a DIY
 * file backend. The Pulumi CLI cannot run here; what the stand-in does follows pulumi/pulumi:
 *
 * <ul>
 *   <li>the backend is {@code PULUMI_BACKEND_URL} ({@code file://} only here), its stacks at {@code
 *       .pulumi/stacks/<project>/<stack>.json} under {@code .pulumi/meta.yaml} version 1
 *       (pkg/backend/diy/store.go, projectReferenceStore; meta.go: a new, empty store gets version
 *       1); a stack reference is {@code stack}, {@code org/stack} or {@code org/project/stack}, org
 *       always "organization" (store.go, ParseReference);
 *   <li>a checkpoint is {@code {"version": 3, "checkpoint": {"stack", "latest"}}}, {@code latest}
 *       left out for a stack never updated (sdk/go/common/apitype/core.go; pkg/resource/stack/
 *       checkpoint.go, SerializeCheckpoint with a nil snapshot); one that does not parse fails the
 *       command; it is written whole, to a temporary name then renamed (gocloud's fileblob), the
 *       previous one kept as {@code .json.bak} (pkg/backend/diy/state.go, saveStack), and written
 *       again after each step of an update, pending operations included while a step runs (the
 *       engine's snapshot manager);
 *   <li>{@code stack select --create} makes a missing stack; the passphrase secrets provider (the
 *       default) needs {@code PULUMI_CONFIG_PASSPHRASE} or {@code PULUMI_CONFIG_PASSPHRASE_FILE}
 *       and keeps its salt as {@code encryptionsalt} in {@code Pulumi.<stack>.yaml}, and as {@code
 *       secrets_providers} {@code {"type": "passphrase", "state": {"salt"}}} in the checkpoint;
 *   <li>{@code config set-all --plaintext k=v --secret k=v} (pulumi_config_set-all docs): a key
 *       without a namespace is the project's; a secret is kept as {@code secure:};
 *   <li>{@code up}, {@code destroy}, {@code refresh} need {@code --yes} or {@code --skip-preview}
 *       when non-interactive ("--yes or --skip-preview must be passed in to proceed when running in
 *       non-interactive mode"); {@code preview} writes nothing;
 *   <li>the first SIGINT (or SIGTERM) cancels: the step in flight ends, the checkpoint is saved,
 *       and the update fails; a second one terminates at once, the pending operation left in the
 *       checkpoint (pkg/backend/cancellation.go: Cancel, then Terminate);
 *   <li>errors are printed as {@code error: ...} and the exit code is 255 (sdk/go/common/util/
 *       cmdutil/exit.go: os.Exit(-1));
 *   <li>{@code stack output --json}: the root stack resource's outputs, secrets as "[secret]"
 *       unless {@code --show-secrets} (pkg/cmd/pulumi/stack/stack_output.go, MassageSecrets);
 *   <li>a Node.js program ({@code runtime: nodejs}) needs its dependencies installed: without
 *       {@code node_modules/@pulumi/pulumi} the language host fails ("It looks like the Pulumi SDK
 *       has not been installed. Have you run npm install or yarn install?").
 * </ul>
 *
 * <p>The program: where Pulumi runs the language host, the stand-in reads {@code resources} and
 * {@code outputs} from Pulumi.yaml, as a Pulumi YAML program declares them; a resource is "created"
 * in its {@code createMs} property's milliseconds, holds {@code allocateMb} MiB while it is, and
 * fails with its {@code fail} property's message; a {@code command:local:Command} (the
 * pulumi-command provider, which the real CLI runs too once its plugin is installed) runs its
 * {@code create} with {@code sh -c}, and fails when it does; an output's {@code ${key}} is the
 * stack's config value, and {@code fn::secret} makes it a secret.
 */
public final class FakePulumi {
  static final String VERSION = "v3.205.0";
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final String SECRET_SIG = "4dabf18193072939515e22adb298388d";
  private static final String SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270";
  private static final AtomicInteger interrupts = new AtomicInteger();
  private static volatile boolean inUpdate;

  private FakePulumi() {}

  /** An error the CLI prints as {@code error: ...} before exiting 255. */
  static final class Failure extends Exception {
    Failure(String message) {
      super(message);
    }
  }

  public static void main(String[] args) throws Exception {
    try {
      run(args);
      System.out.flush();
      System.exit(0);
    } catch (Failure f) {
      System.out.flush();
      System.err.println("error: " + f.getMessage());
      System.err.flush();
      System.exit(255);
    }
  }

  /** The words and flags of a command line. */
  private record Line(List<String> words, Map<String, List<String>> flags) {
    boolean has(String... names) {
      for (String n : names) {
        if (flags.containsKey(n)) {
          return true;
        }
      }
      return false;
    }

    String one(String... names) {
      for (String n : names) {
        List<String> v = flags.get(n);
        if (v != null && !v.isEmpty()) {
          return v.get(v.size() - 1);
        }
      }
      return null;
    }

    List<String> all(String name) {
      return flags.getOrDefault(name, List.of());
    }
  }

  private static final java.util.Set<String> VALUED =
      java.util.Set.of(
          "--stack",
          "-s",
          "--secrets-provider",
          "--plaintext",
          "--secret",
          "--cwd",
          "-C",
          "--color");

  private static Line parse(String[] args) {
    List<String> words = new ArrayList<>();
    Map<String, List<String>> flags = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.startsWith("-")) {
        String name = a;
        String value = null;
        int eq = a.indexOf('=');
        if (a.startsWith("--") && eq > 0) {
          name = a.substring(0, eq);
          value = a.substring(eq + 1);
        } else if (VALUED.contains(a) && i + 1 < args.length) {
          value = args[++i];
        }
        flags.computeIfAbsent(name, k -> new ArrayList<>()).add(value == null ? "" : value);
      } else {
        words.add(a);
      }
    }
    return new Line(words, flags);
  }

  static void run(String[] args) throws Exception {
    Line line = parse(args);
    List<String> w = line.words();
    String cmd = w.isEmpty() ? "" : w.get(0);
    if (cmd.equals("version")) {
      System.out.println(VERSION);
      return;
    }
    Path cwd = Path.of(line.one("--cwd", "-C") == null ? "." : line.one("--cwd", "-C"));
    switch (cmd) {
      case "stack" -> {
        String sub = w.size() > 1 ? w.get(1) : "";
        if (sub.equals("select")) {
          stackSelect(cwd, line);
        } else if (sub.equals("output")) {
          stackOutput(cwd, line);
        } else {
          throw new Failure("the stand-in has no `pulumi stack " + sub + "`");
        }
      }
      case "config" -> {
        if (w.size() > 1 && w.get(1).equals("set-all")) {
          configSetAll(cwd, line);
        } else {
          throw new Failure("the stand-in has only `pulumi config set-all`");
        }
      }
      case "up", "update", "destroy", "refresh", "preview" -> operation(cwd, cmd, line);
      default -> throw new Failure("unknown command \"" + cmd + "\" for \"pulumi\"");
    }
  }

  // ---- the backend -------------------------------------------------------------------------

  private static Path backend() throws Failure {
    String url = System.getenv("PULUMI_BACKEND_URL");
    if (url == null || !url.startsWith("file://")) {
      throw new Failure("the stand-in keeps state in a file:// backend only; got " + url);
    }
    Path root = Path.of(url.substring("file://".length()));
    Path meta = root.resolve(".pulumi").resolve("meta.yaml");
    try {
      if (!Files.exists(meta)) {
        Files.createDirectories(meta.getParent());
        Files.writeString(meta, "version: 1\n");
      }
      JsonNode m = YAML.readTree(Files.readString(meta));
      if (m == null || !m.path("version").isInt()) {
        throw new Failure("corrupt store: missing version in \".pulumi/meta.yaml\"");
      }
      if (m.path("version").asInt() != 1) {
        throw new Failure("the stand-in follows the project layout (meta.yaml version 1) only");
      }
    } catch (IOException e) {
      throw new Failure("read \".pulumi/meta.yaml\": " + e.getMessage());
    }
    return root;
  }

  /** A parsed stack reference: its project and name, and the checkpoint file. */
  private record Ref(String project, String stack, Path file) {
    String qualified() {
      return "organization/" + project + "/" + stack;
    }
  }

  private static Ref ref(Path cwd, Line line) throws Failure {
    String project = projectFile(cwd).path("name").asText();
    String s = line.one("--stack", "-s");
    if (s == null || s.isEmpty()) {
      throw new Failure("no stack selected; please use `pulumi stack select`");
    }
    String[] parts = s.split("/", -1);
    String org = parts.length > 1 ? parts[0] : "organization";
    String proj = parts.length == 3 ? parts[1] : project;
    String name = parts[parts.length - 1];
    if (parts.length > 3) {
      throw new Failure("could not parse stack reference '" + s + "'");
    }
    if (!org.equals("organization")) {
      throw new Failure("organization name must be 'organization'");
    }
    if (!name.matches("[A-Za-z0-9_.-]{1,100}")) {
      throw new Failure(
          "stack names may only contain alphanumerics, hyphens, underscores, or periods");
    }
    if (!proj.equals(project)) {
      throw new Failure("provided project name \"" + proj + "\" doesn't match Pulumi.yaml");
    }
    Path file =
        backend().resolve(".pulumi").resolve("stacks").resolve(proj).resolve(name + ".json");
    return new Ref(proj, name, file);
  }

  private static JsonNode projectFile(Path cwd) throws Failure {
    for (String f : new String[] {"Pulumi.yaml", "Pulumi.yml"}) {
      Path p = cwd.resolve(f);
      if (Files.exists(p)) {
        try {
          JsonNode n = YAML.readTree(Files.readString(p));
          if (n == null || !n.path("name").isTextual()) {
            throw new Failure("project is missing a 'name' attribute");
          }
          return n;
        } catch (IOException e) {
          throw new Failure("could not unmarshal '" + p + "': " + e.getMessage());
        }
      }
    }
    throw new Failure(
        "no Pulumi.yaml project file found (searching upwards from " + cwd.toAbsolutePath() + ")");
  }

  private static ObjectNode readCheckpoint(Ref r) throws Failure {
    String text;
    try {
      text = Files.readString(r.file());
    } catch (java.nio.file.NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      throw new Failure("could not read checkpoint: " + e.getMessage());
    }
    String problem = PulumiCheckpoint.problemOf(text);
    if (problem != null) {
      throw new Failure(
          "could not get stack '" + r.qualified() + "': failed to load checkpoint: " + problem);
    }
    return (ObjectNode) Json.tree(text);
  }

  private static void writeCheckpoint(Ref r, ObjectNode cp) throws Failure {
    try {
      Files.createDirectories(r.file().getParent());
      if (Files.exists(r.file())) {
        Files.copy(
            r.file(),
            r.file().resolveSibling(r.stack() + ".json.bak"),
            StandardCopyOption.REPLACE_EXISTING);
      }
      Path tmp = r.file().resolveSibling(r.stack() + ".json." + UUID.randomUUID() + ".tmp");
      Files.writeString(tmp, Json.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(cp));
      Files.move(
          tmp, r.file(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new Failure("could not save checkpoint: " + e.getMessage());
    }
  }

  // ---- secrets -----------------------------------------------------------------------------

  private static String passphrase() throws Failure {
    String p = System.getenv("PULUMI_CONFIG_PASSPHRASE");
    String f = System.getenv("PULUMI_CONFIG_PASSPHRASE_FILE");
    if (p == null && f != null) {
      try {
        p = Files.readString(Path.of(f)).strip();
      } catch (IOException e) {
        throw new Failure("unable to read PULUMI_CONFIG_PASSPHRASE_FILE: " + e.getMessage());
      }
    }
    if (p == null) {
      throw new Failure(
          "constructing secrets manager of type \"passphrase\": passphrase must be set with"
              + " PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables");
    }
    return p;
  }

  private static String digest(String s) {
    try {
      return Base64.getEncoder()
          .encodeToString(
              MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)))
          .substring(0, 16);
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A new salt: "v1:SALT:v1:CHECK", the check proving the passphrase later. */
  private static String newSalt(String passphrase) {
    String salt = UUID.randomUUID().toString().substring(0, 12);
    return "v1:" + salt + ":v1:" + digest(passphrase + salt);
  }

  private static void checkSalt(String salt, String passphrase) throws Failure {
    String[] p = salt.split(":");
    if (p.length != 4 || !p[3].equals(digest(passphrase + p[1]))) {
      throw new Failure(
          "incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the correct passphrase or"
              + " set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase");
    }
  }

  private static String encrypt(String value) {
    return "v1:"
        + Base64.getEncoder()
            .encodeToString(
                new StringBuilder(value).reverse().toString().getBytes(StandardCharsets.UTF_8));
  }

  private static String decrypt(String ciphertext) {
    String b = ciphertext.substring(3);
    return new StringBuilder(new String(Base64.getDecoder().decode(b), StandardCharsets.UTF_8))
        .reverse()
        .toString();
  }

  // ---- stack settings ----------------------------------------------------------------------

  private static Path settingsFile(Path cwd, Ref r) {
    return cwd.resolve("Pulumi." + r.stack() + ".yaml");
  }

  private static ObjectNode settings(Path cwd, Ref r) throws Failure {
    Path f = settingsFile(cwd, r);
    try {
      if (!Files.exists(f)) {
        return Json.MAPPER.createObjectNode();
      }
      JsonNode n = YAML.readTree(Files.readString(f));
      return n instanceof ObjectNode o ? o : Json.MAPPER.createObjectNode();
    } catch (IOException e) {
      throw new Failure("could not read " + f + ": " + e.getMessage());
    }
  }

  private static void saveSettings(Path cwd, Ref r, ObjectNode s) throws Failure {
    try {
      Files.writeString(settingsFile(cwd, r), YAML.writeValueAsString(s));
    } catch (IOException e) {
      throw new Failure("could not save stack settings: " + e.getMessage());
    }
  }

  /** The stack's salt, checked against the passphrase; made (and saved) when there is none. */
  private static String salt(Path cwd, Ref r, ObjectNode settings) throws Failure {
    String pass = passphrase();
    String salt = settings.path("encryptionsalt").asText(null);
    if (salt == null) {
      salt = newSalt(pass);
      settings.put("encryptionsalt", salt);
      saveSettings(cwd, r, settings);
    }
    checkSalt(salt, pass);
    return salt;
  }

  // ---- commands ----------------------------------------------------------------------------

  private static void stackSelect(Path cwd, Line line) throws Failure {
    Ref r = ref(cwd, line);
    if (readCheckpoint(r) != null) {
      return;
    }
    if (!line.has("--create", "-c")) {
      throw new Failure("no stack named '" + r.qualified() + "' found");
    }
    String provider = line.one("--secrets-provider");
    if (provider != null
        && !provider.isEmpty()
        && !provider.equals("passphrase")
        && !provider.equals("default")) {
      throw new Failure("the stand-in has the passphrase secrets provider only, not " + provider);
    }
    ObjectNode s = settings(cwd, r);
    salt(cwd, r, s);
    ObjectNode cp = Json.MAPPER.createObjectNode();
    cp.put("version", PulumiCheckpoint.CURRENT_VERSION);
    cp.putObject("checkpoint").put("stack", r.qualified());
    writeCheckpoint(r, cp);
    System.out.println("Created stack '" + r.stack() + "'");
  }

  private static void configSetAll(Path cwd, Line line) throws Failure {
    Ref r = ref(cwd, line);
    if (readCheckpoint(r) == null) {
      throw new Failure("no stack named '" + r.qualified() + "' found");
    }
    ObjectNode s = settings(cwd, r);
    ObjectNode config = s.has("config") ? (ObjectNode) s.get("config") : s.putObject("config");
    boolean secrets = !line.all("--secret").isEmpty();
    if (secrets) {
      salt(cwd, r, s);
    }
    for (String flag : new String[] {"--plaintext", "--secret"}) {
      for (String kv : line.all(flag)) {
        int eq = kv.indexOf('=');
        if (eq <= 0) {
          throw new Failure("could not parse " + kv + " as a configuration key/value pair");
        }
        String key = kv.substring(0, eq);
        if (!key.contains(":")) {
          key = r.project() + ":" + key;
        }
        String value = kv.substring(eq + 1);
        if (flag.equals("--secret")) {
          config.putObject(key).put("secure", encrypt(value));
        } else {
          config.put(key, value);
        }
      }
    }
    saveSettings(cwd, r, s);
  }

  private static void stackOutput(Path cwd, Line line) throws Failure, IOException {
    Ref r = ref(cwd, line);
    ObjectNode cp = readCheckpoint(r);
    if (cp == null) {
      throw new Failure("no stack named '" + r.qualified() + "' found");
    }
    ObjectNode out = Json.MAPPER.createObjectNode();
    for (JsonNode res : cp.path("checkpoint").path("latest").path("resources")) {
      if (res.path("type").asText().equals("pulumi:pulumi:Stack")) {
        for (Map.Entry<String, JsonNode> e : res.path("outputs").properties()) {
          JsonNode v = e.getValue();
          if (v.isObject() && SECRET_VALUE.equals(v.path(SECRET_SIG).asText())) {
            out.put(
                e.getKey(),
                line.has("--show-secrets") ? decrypt(v.path("ciphertext").asText()) : "[secret]");
          } else {
            out.set(e.getKey(), v);
          }
        }
      }
    }
    if (line.has("--json", "-j")) {
      System.out.println(Json.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(out));
    } else {
      out.properties().forEach(e -> System.out.println(e.getKey() + "  " + e.getValue()));
    }
  }

  /** A resource of the program: its name, type and properties. */
  private record Declared(String name, String type, JsonNode properties) {}

  private static void operation(Path cwd, String op, Line line) throws Exception {
    if (op.equals("update")) {
      op = "up";
    }
    boolean preview = op.equals("preview");
    if (!preview
        && line.has("--non-interactive")
        && !line.has("--yes", "-y", "--skip-preview", "-f")) {
      throw new Failure(
          "--yes or --skip-preview must be passed in to proceed when running in non-interactive"
              + " mode");
    }
    JsonNode project = projectFile(cwd);
    Ref r = ref(cwd, line);
    ObjectNode cp = readCheckpoint(r);
    if (cp == null) {
      throw new Failure("no stack named '" + r.qualified() + "' found");
    }
    ObjectNode s = settings(cwd, r);
    String salt = salt(cwd, r, s);
    if (project.path("runtime").asText().equals("nodejs")
        && !Files.isDirectory(cwd.resolve("node_modules").resolve("@pulumi").resolve("pulumi"))) {
      throw new Failure(
          "It looks like the Pulumi SDK has not been installed. Have you run npm install or yarn"
              + " install?");
    }
    Map<String, String> config = new HashMap<>();
    for (Map.Entry<String, JsonNode> e : s.path("config").properties()) {
      JsonNode v = e.getValue();
      config.put(
          e.getKey(),
          v.isObject() && v.has("secure") ? decrypt(v.path("secure").asText()) : v.asText());
    }
    List<Declared> program = new ArrayList<>();
    if (!op.equals("destroy")) {
      for (Map.Entry<String, JsonNode> e : project.path("resources").properties()) {
        program.add(
            new Declared(
                e.getKey(), e.getValue().path("type").asText(), e.getValue().path("properties")));
      }
    }
    installSignals();
    String prefix = "urn:pulumi:" + r.stack() + "::" + r.project() + "::";
    ObjectNode latest =
        cp.path("checkpoint").path("latest").isObject()
            ? (ObjectNode) cp.path("checkpoint").path("latest")
            : null;
    List<ObjectNode> current = new ArrayList<>();
    if (latest != null) {
      for (JsonNode res : latest.path("resources")) {
        if (!res.path("type").asText().equals("pulumi:pulumi:Stack")) {
          current.add((ObjectNode) res);
        }
      }
    }
    System.out.println(
        (preview
                ? "Previewing "
                : op.equals("destroy")
                    ? "Destroying "
                    : op.equals("refresh") ? "Refreshing " : "Updating ")
            + "("
            + r.qualified()
            + "):");
    int created = 0;
    int deleted = 0;
    int same = 0;
    String failed = null;
    List<ObjectNode> next = new ArrayList<>();
    inUpdate = !preview;
    long started = System.currentTimeMillis();
    if (op.equals("refresh")) {
      next.addAll(current);
      same = current.size();
    } else {
      for (Declared d : program) {
        if (interrupts.get() > 0) {
          break;
        }
        String urn = prefix + d.type() + "::" + d.name();
        ObjectNode had =
            current.stream()
                .filter(x -> x.path("urn").asText().equals(urn))
                .findFirst()
                .orElse(null);
        if (had != null && had.path("inputs").equals(d.properties())) {
          next.add(had);
          same++;
          continue;
        }
        System.out.println("    +  " + d.type() + " " + d.name() + " creating (0s)");
        if (preview) {
          created++;
          continue;
        }
        ObjectNode res = Json.MAPPER.createObjectNode();
        res.put("urn", urn);
        res.put("custom", true);
        res.put("id", had != null ? had.path("id").asText() : UUID.randomUUID().toString());
        res.put("type", d.type());
        res.set(
            "inputs",
            d.properties().isMissingNode() ? Json.MAPPER.createObjectNode() : d.properties());
        res.set("outputs", res.get("inputs").deepCopy());
        res.put("parent", prefix + "pulumi:pulumi:Stack::" + r.project() + "-" + r.stack());
        ArrayNode pending = Json.MAPPER.createArrayNode();
        pending.addObject().put("type", had == null ? "creating" : "updating").set("resource", res);
        save(r, cp, salt, next, pending, null);
        byte[][] held = touch(d.properties().path("allocateMb").asInt(0));
        sleep(d.properties().path("createMs").asLong(0));
        java.lang.ref.Reference.reachabilityFence(held);
        if (d.type().equals("command:local:Command") && d.properties().has("create")) {
          String out = command(cwd, d.properties().path("create").asText());
          if (out == null) {
            failed = "command failed: " + d.properties().path("create").asText();
          } else {
            ((ObjectNode) res.get("outputs")).put("stdout", out.strip());
          }
        }
        if (interrupts.get() > 1) {
          terminate();
        }
        if (failed == null && d.properties().has("fail")) {
          failed = d.properties().path("fail").asText();
        }
        if (failed != null) {
          System.out.println(
              "    +  " + d.type() + " " + d.name() + " creating failed error: " + failed);
          break;
        }
        next.add(res);
        created++;
        System.out.println(
            "    +  "
                + d.type()
                + " "
                + d.name()
                + " created ("
                + (System.currentTimeMillis() - started) / 1000
                + "s)");
      }
      if (!preview && failed == null && interrupts.get() == 0) {
        for (ObjectNode had : current) {
          boolean kept = next.stream().anyMatch(x -> x.path("urn").equals(had.path("urn")));
          if (!kept) {
            System.out.println(
                "    -  " + had.path("type").asText() + " " + urn(had) + " deleting (0s)");
            ArrayNode pending = Json.MAPPER.createArrayNode();
            pending.addObject().put("type", "deleting").set("resource", had);
            List<ObjectNode> left = new ArrayList<>(next);
            current.stream()
                .filter(
                    x -> x != had && !next.contains(x) && !x.path("urn").equals(had.path("urn")))
                .forEach(left::add);
            save(r, cp, salt, left, pending, null);
            sleep(had.path("inputs").path("createMs").asLong(0) / 2);
            if (interrupts.get() > 1) {
              terminate();
            }
            deleted++;
          }
        }
      } else if (!preview) {
        // what was not reached stays as it was
        for (ObjectNode had : current) {
          if (next.stream().noneMatch(x -> x.path("urn").equals(had.path("urn")))) {
            next.add(had);
          }
        }
      }
    }
    if (preview) {
      System.out.println("Resources:\n    + " + created + " to create\n    " + same + " unchanged");
      return;
    }
    ObjectNode outputs = Json.MAPPER.createObjectNode();
    if (!op.equals("destroy") && !op.equals("refresh")) {
      for (Map.Entry<String, JsonNode> e : project.path("outputs").properties()) {
        JsonNode v = e.getValue();
        if (v.isObject() && v.has("fn::secret")) {
          ObjectNode sec = outputs.putObject(e.getKey());
          sec.put(SECRET_SIG, SECRET_VALUE);
          sec.put("ciphertext", encrypt(interpolate(v.path("fn::secret").asText(), config, r)));
        } else {
          outputs.put(e.getKey(), interpolate(v.asText(), config, r));
        }
      }
    } else if (op.equals("refresh") && latest != null) {
      for (JsonNode res : latest.path("resources")) {
        if (res.path("type").asText().equals("pulumi:pulumi:Stack")) {
          outputs.setAll((ObjectNode) res.path("outputs"));
        }
      }
    }
    boolean stopped = interrupts.get() > 0 || failed != null;
    if (op.equals("destroy") && !stopped) {
      save(r, cp, salt, List.of(), null, null);
    } else {
      save(r, cp, salt, next, null, stopped && latest != null ? null : outputs);
    }
    if (interrupts.get() > 0) {
      throw new Failure("update canceled");
    }
    if (failed != null) {
      throw new Failure("update failed");
    }
    System.out.println("Outputs:");
    outputs
        .properties()
        .forEach(
            e ->
                System.out.println(
                    "    "
                        + e.getKey()
                        + ": "
                        + (e.getValue().isObject() ? "[secret]" : e.getValue())));
    System.out.println(
        "Resources:\n    + "
            + created
            + " created\n    - "
            + deleted
            + " deleted\n    "
            + same
            + " unchanged");
    System.out.println("Duration: " + (System.currentTimeMillis() - started) / 1000 + "s");
  }

  private static String urn(ObjectNode res) {
    String u = res.path("urn").asText();
    return u.substring(u.lastIndexOf("::") + 2);
  }

  private static final Pattern REF = Pattern.compile("\\$\\{([A-Za-z0-9_.:-]+)}");

  private static String interpolate(String text, Map<String, String> config, Ref r) {
    Matcher m = REF.matcher(text);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String key = m.group(1).contains(":") ? m.group(1) : r.project() + ":" + m.group(1);
      m.appendReplacement(out, Matcher.quoteReplacement(config.getOrDefault(key, "")));
    }
    m.appendTail(out);
    return out.toString();
  }

  /** Writes the checkpoint: the stack resource (with outputs, when given) and {@code resources}. */
  private static void save(
      Ref r,
      ObjectNode cp,
      String salt,
      List<ObjectNode> resources,
      ArrayNode pending,
      ObjectNode outputs)
      throws Failure {
    ObjectNode checkpoint = (ObjectNode) cp.get("checkpoint");
    JsonNode was = checkpoint.path("latest");
    ObjectNode latest = Json.MAPPER.createObjectNode();
    ObjectNode manifest = latest.putObject("manifest");
    manifest.put("time", Instant.now().toString());
    manifest.put("magic", digest(VERSION));
    manifest.put("version", VERSION);
    ObjectNode sp = latest.putObject("secrets_providers");
    sp.put("type", "passphrase");
    sp.putObject("state").put("salt", salt);
    ArrayNode list = latest.putArray("resources");
    if (!resources.isEmpty() || outputs != null) {
      ObjectNode stack = list.addObject();
      stack.put(
          "urn",
          "urn:pulumi:"
              + r.stack()
              + "::"
              + r.project()
              + "::pulumi:pulumi:Stack::"
              + r.project()
              + "-"
              + r.stack());
      stack.put("custom", false);
      stack.put("type", "pulumi:pulumi:Stack");
      JsonNode prevOut = null;
      for (JsonNode res : was.path("resources")) {
        if (res.path("type").asText().equals("pulumi:pulumi:Stack")) {
          prevOut = res.path("outputs");
        }
      }
      if (outputs != null) {
        stack.set("outputs", outputs);
      } else if (prevOut != null && prevOut.isObject()) {
        stack.set("outputs", prevOut);
      }
      resources.forEach(list::add);
    }
    if (pending != null) {
      latest.set("pending_operations", pending);
    }
    checkpoint.set("latest", latest);
    writeCheckpoint(r, cp);
  }

  /**
   * Runs a {@code command:local:Command}'s {@code create} with {@code sh -c} in the program's
   * directory, as pulumi-command's local provider does; its stdout, or null when it failed.
   */
  private static String command(Path cwd, String create) {
    try {
      Process p =
          new ProcessBuilder("sh", "-c", create)
              .directory(cwd.toFile())
              .redirectError(ProcessBuilder.Redirect.INHERIT)
              .start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return p.waitFor() == 0 ? out : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** Holds {@code mb} MiB, each page touched, in 1 MiB pieces (no one array the heap must fit). */
  private static byte[][] touch(int mb) {
    byte[][] held = new byte[mb][];
    for (int i = 0; i < mb; i++) {
      held[i] = new byte[1 << 20];
      for (int j = 0; j < held[i].length; j += 4096) {
        held[i][j] = 1;
      }
    }
    return held;
  }

  private static void sleep(long ms) {
    long end = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < end && interrupts.get() < 2) {
      try {
        Thread.sleep(Math.min(20, Math.max(1, end - System.currentTimeMillis())));
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  private static void terminate() {
    System.out.println("^C received; terminating");
    System.out.flush();
    Runtime.getRuntime().halt(255);
  }

  /** SIGINT and SIGTERM: the first cancels, the second terminates (cancellation.go). */
  private static void installSignals() {
    io.oneshot.process.Signals.handle("INT", () -> interrupted(false));
    io.oneshot.process.Signals.handle("TERM", () -> interrupted(true));
  }

  private static void interrupted(boolean term) {
    int n = interrupts.incrementAndGet();
    if (n > 1) {
      terminate();
      return;
    }
    System.out.println(
        (term
                ? "SIGTERM received; cancelling. If you would like to terminate immediately, send"
                    + " SIGTERM again."
                : "^C received; cancelling. If you would like to terminate immediately, press ^C"
                    + " again.")
            + (inUpdate
                ? "\nNote that terminating immediately may lead to orphaned resources and other"
                    + " inconsistencies."
                : ""));
  }

  /** Writes an executable {@code pulumi} into {@code dir} that runs this stand-in. */
  public static Path install(Path dir) throws IOException {
    Files.createDirectories(dir);
    Path bin = dir.resolve("pulumi");
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(
        List.of(
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Xshare:auto",
            "--enable-native-access=ALL-UNNAMED"));
    cmd.add("-cp");
    cmd.add(String.join(java.io.File.pathSeparator, ChildJvm.classPath()));
    cmd.add(FakePulumi.class.getName());
    return ChildJvm.execScript(bin, cmd);
  }

  /** The {@code pulumi} the tests run: {@code PULUMI} when it names one, else the stand-in. */
  public static Path binary(Path dir) throws IOException {
    String real = System.getenv("PULUMI");
    return real != null && !real.isBlank() ? Path.of(real) : install(dir);
  }
}
