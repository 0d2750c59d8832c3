package io.oneshot.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "submit",
    header = "Enqueues a build.",
    mixinStandardHelpOptions = true,
    sortOptions = false,
    description = {
      "Enqueues a build. Its tags choose the route (the first route whose tags contain all of"
          + " them); the build waits there for a free slot.",
      ""
    },
    footer = {
      "",
      "Examples:",
      "  oneshot submit --script 'make deploy' --tag org=default --wait",
      "  oneshot submit --terraform ./envs/dev --var region=eu-west-1 --workspace dev --follow",
      "  oneshot submit --terraform ./envs/dev --destroy --workspace dev --wait",
      "  oneshot submit --script-file deploy.sh --env STAGE=dev --tag org=default --follow",
      "  oneshot submit --script 'deploy --key \"$KEY\"' --env KEY=s3cr3t --sensitive KEY --wait",
      "  oneshot submit --pulumi ./web --stack dev --config aws:region=eu-west-1 \\",
      "      --config dbPassword=s3cr3t --sensitive dbPassword --workspace web-dev --follow",
      "  oneshot submit --pulumi ./web --stack dev --operation preview --wait",
      "  oneshot submit --input build.json -o json",
      "  oneshot submit --terraform ./big --memory 4Gi --cpu 2 --tag org=default --wait",
      "  oneshot submit --script ./gpu-job.sh --image ghcr.io/acme/cuda:12 \\",
      "      --node-selector pool=gpu --toleration nvidia.com/gpu:NoSchedule --tag org=ml",
      "",
      "Exit codes with --wait or --follow: 0 succeeded, 1 failed, 3 canceled;"
          + " otherwise 0 once the build is queued. 2 for bad input, 4 when the server is"
          + " unreachable."
    })
final class SubmitCommand implements Callable<Integer> {
  private static final long MAX_PROGRAM_FILE = 4L << 20;

  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Mixin ClientOptions client;

  /** The build's own pod settings (a route allows what it allows; the server says the rest). */
  @Mixin PodOptions pod;

  static final class What {
    @Option(
        names = "--script",
        paramLabel = "CMD",
        description = "Run CMD with sh -c (provisioner script).")
    String script;

    @Option(
        names = "--script-file",
        paramLabel = "FILE",
        description =
            "Run the shell script in FILE with sh (provisioner script); for scripts too long for"
                + " a command line.")
    Path scriptFile;

    @Option(
        names = "--terraform",
        paramLabel = "DIR",
        // The file names on a line of their own: help text is wrapped at their dots too.
        description = {
          "Run terraform on the module in DIR (provisioner terraform): the files",
          ".tf, .tf.json, .tfvars and .terraform.lock.hcl",
          "in DIR and its subdirectories."
        })
    Path terraform;

    @Option(
        names = "--pulumi",
        paramLabel = "DIR",
        description = {
          "Run one operation of one Pulumi stack (provisioner pulumi) on the program",
          "in DIR: its text files, without node_modules and hidden directories;",
          "with --stack, and --operation, --config as wanted."
        })
    Path pulumi;

    @Option(
        names = "--input",
        paramLabel = "FILE",
        description = "Use the build input in FILE (JSON; - for stdin) as it is.")
    String input;
  }

  @ArgGroup(exclusive = true, multiplicity = "1")
  What what;

  @Option(
      names = "--tag",
      paramLabel = "KEY=VALUE",
      description = "A routing tag; repeat for more.")
  Map<String, String> tags = new LinkedHashMap<>();

  @Option(
      names = "--env",
      paramLabel = "NAME=VALUE",
      description = "An environment variable for the script; repeat for more.")
  Map<String, String> env = new LinkedHashMap<>();

  @Option(
      names = "--var",
      paramLabel = "NAME=VALUE",
      description = "A terraform variable; repeat for more.")
  Map<String, String> vars = new LinkedHashMap<>();

  @Option(
      names = "--sensitive",
      paramLabel = "NAME",
      description =
          "An --env, --var or --config whose value is secret: masked as *** in the build's log, never"
              + " returned by the API, stored encrypted; repeat for more.")
  List<String> sensitive = new ArrayList<>();

  @Option(names = "--destroy", description = "terraform destroy instead of apply.")
  boolean destroy;

  @Option(
      names = "--stack",
      paramLabel = "NAME",
      description = "The Pulumi stack of a --pulumi build (its project is Pulumi.yaml's name).")
  String stack;

  @Option(
      names = "--operation",
      paramLabel = "OP",
      defaultValue = "up",
      description = "What a --pulumi build does: up, preview, destroy or refresh (default: up).")
  String operation;

  @Option(
      names = "--config",
      paramLabel = "KEY=VALUE",
      description =
          "A Pulumi config value of the stack (\"key\" of the project, or \"ns:key\"); repeat for"
              + " more; --sensitive KEY makes it a secret.")
  Map<String, String> config = new LinkedHashMap<>();

  @Option(
      names = "--workspace",
      paramLabel = "KEY",
      description =
          "Builds with the same workspace share state (terraform's, or a Pulumi stack's"
              + " checkpoint) and run one at a time, in order.")
  String workspace;

  @Option(
      names = "--priority",
      paramLabel = "N",
      defaultValue = "0",
      description = "Higher runs first within a route, -1000 to 1000 (default: ${DEFAULT-VALUE}).")
  int priority;

  @Option(
      names = "--wait",
      description = "Wait for the outcome, showing progress: pending, launching, running, done.")
  boolean wait;

  @Option(
      names = {"-f", "--follow"},
      description = "Stream the build's log until it ends.")
  boolean follow;

  @Override
  public Integer call() {
    ObjectNode input = buildInput();
    ObjectNode own = pod.pod();
    if (own != null) {
      if (input.path("pod") instanceof ObjectNode given) {
        given.setAll(own);
      } else {
        input.set("pod", own);
      }
    }
    boolean script = what.script != null || what.scriptFile != null;
    if (what.pulumi == null
        && (stack != null
            || !config.isEmpty()
            || spec.commandLine().getParseResult().hasMatchedOption("--operation"))) {
      throw new CliException(Main.USAGE, "--stack, --operation and --config go with --pulumi");
    }
    if (what.pulumi != null && (!env.isEmpty() || !vars.isEmpty() || destroy)) {
      throw new CliException(
          Main.USAGE,
          "--env, --var and --destroy are not for --pulumi builds: use --config and --operation"
              + " destroy");
    }
    if (!script
        && what.terraform == null
        && what.pulumi == null
        && (!env.isEmpty() || !vars.isEmpty() || destroy)) {
      throw new CliException(
          Main.USAGE, "--env, --var and --destroy go with --script or --terraform, not --input");
    }
    if (script && (!vars.isEmpty() || destroy)) {
      throw new CliException(Main.USAGE, "--var and --destroy are for --terraform builds");
    }
    if (what.terraform != null && !env.isEmpty()) {
      throw new CliException(Main.USAGE, "--env is for --script builds; terraform takes --var");
    }
    ObjectNode body = Json.MAPPER.createObjectNode();
    body.set("tags", Json.MAPPER.valueToTree(tags));
    body.set("input", input);
    body.put("priority", priority);
    if (workspace != null) {
      body.put("workspace", workspace);
    }
    String provisioner = input.path("provisioner").asText();
    if (workspace == null
        && (provisioner.equals("terraform")
            || (provisioner.equals("pulumi")
                && !"preview".equals(input.path("operation").asText())))) {
      spec.commandLine()
          .getErr()
          .println(
              "warning: no --workspace: "
                  + (provisioner.equals("pulumi") ? "the stack's checkpoint" : "terraform's state")
                  + " is not kept after this build, so what it creates is known to no state;"
                  + " --workspace NAME keeps it");
    }
    ApiClient api = client.client();
    JsonNode created = api.post("/api/v1/builds", Json.write(body));
    return Waiting.queued(
        api,
        created,
        "build "
            + created.path("id").asLong()
            + " queued on route "
            + created.path("route").asText(),
        wait,
        follow,
        client.json(),
        spec.commandLine().getOut(),
        spec.commandLine().getErr());
  }

  /** The script to run: --script as given, or the text of --script-file. */
  private String scriptText() {
    if (what.script != null) {
      return what.script;
    }
    try {
      return Files.readString(what.scriptFile);
    } catch (java.nio.file.NoSuchFileException e) {
      throw new CliException(Main.USAGE, "--script-file: no such file: " + what.scriptFile);
    } catch (IOException e) {
      throw new CliException(
          Main.USAGE, "--script-file: cannot read " + what.scriptFile + ": " + e.getMessage());
    }
  }

  private ObjectNode buildInput() {
    ObjectNode input = inputOf();
    if (!sensitive.isEmpty()) {
      Map<String, String> values =
          switch (input.path("provisioner").asText()) {
            case "script" -> env;
            case "pulumi" -> config;
            default -> vars;
          };
      for (String n : sensitive) {
        if (!values.containsKey(n)) {
          throw new CliException(
              Main.USAGE,
              "--sensitive "
                  + n
                  + ": no "
                  + (values == env ? "--env" : values == config ? "--config" : "--var")
                  + " "
                  + n
                  + "=VALUE to keep secret");
        }
      }
      input.set("sensitive", Json.MAPPER.valueToTree(sensitive));
    }
    return input;
  }

  private ObjectNode inputOf() {
    ObjectNode input = Json.MAPPER.createObjectNode();
    if (what.script != null || what.scriptFile != null) {
      input.put("provisioner", "script");
      input.putArray("command").add("sh").add("-c").add(scriptText());
      if (!env.isEmpty()) {
        input.set("env", Json.MAPPER.valueToTree(env));
      }
    } else if (what.terraform != null) {
      input.put("provisioner", "terraform");
      input.set("files", Json.MAPPER.valueToTree(terraformFiles(what.terraform)));
      if (!vars.isEmpty()) {
        input.set("variables", Json.MAPPER.valueToTree(vars));
      }
      input.put("transition", destroy ? "destroy" : "apply");
    } else if (what.pulumi != null) {
      if (stack == null) {
        throw new CliException(
            Main.USAGE, "--pulumi needs --stack NAME: the stack to " + operation);
      }
      if (!List.of("up", "preview", "destroy", "refresh").contains(operation)) {
        throw new CliException(
            Main.USAGE,
            "--operation: " + operation + " is not one of up, preview, destroy, refresh");
      }
      Map<String, String> files = pulumiFiles(what.pulumi);
      input.put("provisioner", "pulumi");
      input.put("operation", operation);
      input.put("project", projectName(what.pulumi, files));
      input.put("stack", stack);
      input.set("files", Json.MAPPER.valueToTree(files));
      if (!config.isEmpty()) {
        input.set("config", Json.MAPPER.valueToTree(config));
      }
    } else {
      if (!sensitive.isEmpty()) {
        throw new CliException(
            Main.USAGE,
            "--sensitive: goes with --script or --terraform; with --input, list the"
                + " names in the input's \"sensitive\"");
      }
      String text;
      try {
        text =
            what.input.equals("-")
                ? new String(System.in.readAllBytes(), StandardCharsets.UTF_8)
                : Files.readString(Path.of(what.input));
      } catch (NoSuchFileException e) {
        throw new CliException(Main.USAGE, "--input: no such file: " + what.input);
      } catch (IOException e) {
        throw new CliException(
            Main.USAGE, "--input: cannot read " + what.input + ": " + e.getMessage());
      }
      JsonNode n;
      try {
        n = Json.MAPPER.readTree(text);
      } catch (JsonProcessingException e) {
        throw new CliException(
            Main.USAGE,
            "--input: "
                + what.input
                + " is not valid JSON: "
                + e.getOriginalMessage()
                + (e.getLocation() == null
                    ? ""
                    : " (line "
                        + e.getLocation().getLineNr()
                        + ", column "
                        + e.getLocation().getColumnNr()
                        + ")"));
      }
      if (!(n instanceof ObjectNode o)) {
        throw new CliException(Main.USAGE, "--input: " + what.input + " must hold a JSON object");
      }
      return o;
    }
    return input;
  }

  /** The module's files by relative path; state, caches and hidden directories are left out. */
  static Map<String, String> terraformFiles(Path dir) {
    Map<String, String> files =
        textFiles("--terraform", dir, rel -> !skip(rel) && wanted(slashed(rel)), false);
    if (files.keySet().stream().noneMatch(n -> n.endsWith(".tf") || n.endsWith(".tf.json"))) {
      throw new CliException(Main.USAGE, "--terraform: " + dir + " holds no .tf or .tf.json file");
    }
    return files;
  }

  /** The project name in the program's Pulumi.yaml. */
  private static String projectName(Path dir, Map<String, String> files) {
    String text = files.getOrDefault("Pulumi.yaml", files.get("Pulumi.yml"));
    if (text == null) {
      throw new CliException(Main.USAGE, "--pulumi: " + dir + " has no Pulumi.yaml");
    }
    try {
      JsonNode y =
          new com.fasterxml.jackson.databind.ObjectMapper(
                  new com.fasterxml.jackson.dataformat.yaml.YAMLFactory())
              .readTree(text);
      if (y != null && y.path("name").isTextual()) {
        return y.path("name").asText();
      }
    } catch (IOException e) {
      throw new CliException(
          Main.USAGE, "--pulumi: " + dir + "/Pulumi.yaml is not YAML: " + e.getMessage());
    }
    throw new CliException(
        Main.USAGE, "--pulumi: " + dir + "/Pulumi.yaml names no project (name:)");
  }

  /**
   * A Pulumi program's text files by relative path; node_modules, hidden directories and files
   * (.git, .pulumi) and binary files are left out.
   */
  static Map<String, String> pulumiFiles(Path dir) {
    return textFiles(
        "--pulumi",
        dir,
        rel -> {
          for (Path part : rel) {
            String n = part.toString();
            if (n.startsWith(".") || n.equals("node_modules") || n.equals("bin")) {
              return false;
            }
          }
          return true;
        },
        true);
  }

  /**
   * The files under {@code dir} that {@code wanted} takes (by relative path), by relative path with
   * '/', read as UTF-8 text, each at most 4 MiB; one that is not UTF-8 is left out when {@code
   * binaryLeftOut}, else refused. Errors name {@code option}.
   */
  private static Map<String, String> textFiles(
      String option, Path dir, java.util.function.Predicate<Path> wanted, boolean binaryLeftOut) {
    if (!Files.isDirectory(dir)) {
      throw new CliException(Main.USAGE, option + ": " + dir + " is not a directory");
    }
    Map<String, String> files = new TreeMap<>();
    List<Path> paths = new ArrayList<>();
    try (Stream<Path> walk = Files.walk(dir, 16)) {
      walk.filter(Files::isRegularFile).forEach(paths::add);
    } catch (IOException e) {
      throw new CliException(Main.USAGE, option + ": cannot read " + dir + ": " + e.getMessage());
    }
    for (Path p : paths) {
      Path rel = dir.relativize(p);
      String name = slashed(rel);
      if (!wanted.test(rel)) {
        continue;
      }
      try {
        if (Files.size(p) > MAX_PROGRAM_FILE) {
          throw new CliException(Main.USAGE, option + ": " + name + " is larger than 4 MiB");
        }
        byte[] bytes = Files.readAllBytes(p);
        files.put(
            name,
            StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString());
      } catch (CharacterCodingException e) {
        if (!binaryLeftOut) {
          throw new CliException(Main.USAGE, option + ": " + name + " is not UTF-8 text");
        }
      } catch (IOException e) {
        throw new CliException(
            Main.USAGE, option + ": cannot read " + name + ": " + e.getMessage());
      }
    }
    return files;
  }

  private static String slashed(Path rel) {
    return rel.toString().replace('\\', '/');
  }

  private static boolean skip(Path rel) {
    for (Path part : rel) {
      String s = part.toString();
      if (s.startsWith(".") && !s.equals(".terraform.lock.hcl")) {
        return true;
      }
    }
    return false;
  }

  private static boolean wanted(String name) {
    return name.endsWith(".tf")
        || name.endsWith(".tf.json")
        || name.endsWith(".tfvars")
        || name.endsWith(".tfvars.json")
        || name.endsWith(".terraform.lock.hcl");
  }
}
