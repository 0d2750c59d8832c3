package io.oneshot.cli;

import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code oneshot} command. Subcommands are thin: they parse, call, print. */
@Command(
    name = "oneshot",
    mixinStandardHelpOptions = true,
    versionProvider = Main.Version.class,
    subcommands = {
      DevCommand.class,
      DispatcherCommand.class,
      ProvisionerdCommand.class,
      MigrateCommand.class,
      SubmitCommand.class,
      BuildsCommand.class,
      RoutesCommand.class,
      RoutesCommand.Top.class,
      WorkspacesCommand.class,
      TokensCommand.class,
      AuditCommand.class,
      HelpCommand.class
    },
    description = {
      "Runs every infrastructure build (a terraform apply, a script) in its own short-lived"
          + " process or Kubernetes Job, dispatched from a PostgreSQL queue.",
      ""
    },
    footer = {
      "",
      "Examples:",
      "  oneshot dev                                   # a local server with its own PostgreSQL",
      "  source ~/.local/share/oneshot/dev/dev.env     # in another shell: URL and token",
      "  oneshot submit --script 'echo hello' --follow",
      "  oneshot builds list",
      "",
      "Exit codes: 0 success, 1 build failed, 2 usage error, 3 build canceled,"
          + " 4 cannot reach the server."
    })
public final class Main implements Runnable {
  public static final int OK = 0;
  public static final int BUILD_FAILED = 1;
  public static final int USAGE = 2;
  public static final int CANCELED = 3;
  public static final int UNREACHABLE = 4;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  public static void main(String[] args) {
    System.exit(execute(args));
  }

  /**
   * What the CLI writes in: the terminal's character set, except that a locale naming none
   * (LC_ALL=C, or no locale at all, as in many containers) reads as ASCII, and a build's log
   * (terraform's box drawing, a check mark) would print as '?'; UTF-8 then, as the terminal most
   * likely is.
   */
  static java.nio.charset.Charset terminalCharset(java.nio.charset.Charset stream) {
    return stream.equals(java.nio.charset.StandardCharsets.US_ASCII)
        ? java.nio.charset.StandardCharsets.UTF_8
        : stream;
  }

  public static int execute(String... args) {
    if (Runtime.version().feature() >= 24) {
      // Netty's direct memory access through sun.misc.Unsafe warns on JDK 24+; go without it.
      System.setProperty("io.netty.noUnsafe", "true");
    }
    PrintWriter out = new PrintWriter(System.out, true, terminalCharset(System.out.charset()));
    PrintWriter err = new PrintWriter(System.err, true, terminalCharset(System.err.charset()));
    try {
      io.oneshot.config.ExtraCaCerts.install(
          System.getenv(), java.nio.file.Path.of(System.getProperty("java.io.tmpdir")));
    } catch (io.oneshot.config.ConfigException e) {
      err.println("error: " + e.getMessage());
      return USAGE;
    }
    int code = commandLine(out, err, args).execute(args);
    out.flush();
    err.flush();
    return code;
  }

  /**
   * A command line that could not be parsed: the error, a suggestion for a misspelt option, and
   * where the help is; not the whole help, which would hide the error.
   */
  private static int usageError(CommandLine.ParameterException e, String[] args) {
    CommandLine cmd = e.getCommandLine();
    PrintWriter err = cmd.getErr();
    err.println("error: " + plain(e.getMessage()));
    CommandLine.UnmatchedArgumentException.printSuggestions(e, err);
    err.println("Try '" + cmd.getCommandSpec().qualifiedName() + " --help' for more.");
    err.flush();
    return USAGE;
  }

  /**
   * picocli's message said as the API says its refusals, "what: why": without its "Error: " (after
   * our "error: "), "Invalid value for positional parameter at index 0 (ID): 'abc' is not a long"
   * as "ID: 'abc' is not a whole number", and "option option" as "option".
   */
  static String plain(String message) {
    return message
        .replaceFirst("^Error: ", "")
        .replace("option option", "option")
        .replaceFirst(
            "^Invalid value for positional parameter at index \\d+ \\(([^)]+)\\): ", "$1: ")
        .replaceFirst("^Invalid value for option '([^']+)'(?: \\([^)]*\\))?: ", "$1: ")
        .replaceFirst(" is not an? (?:long|int|integer)$", " is not a whole number");
  }

  /** A command line writing to the given streams (tests capture them). */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    return configure(new CommandLine(new Main()), out, err);
  }

  /**
   * The command line {@code args} are run with: for {@code provisionerd}, a tree of that command
   * alone ({@link ProvisionerdOnly}), which parses, helps and fails alike; else {@link
   * #commandLine(PrintWriter, PrintWriter)}.
   */
  static CommandLine commandLine(PrintWriter out, PrintWriter err, String... args) {
    return args.length > 0 && args[0].equals("provisionerd")
        ? configure(new CommandLine(new ProvisionerdOnly()), out, err)
        : commandLine(out, err);
  }

  private static CommandLine configure(CommandLine cl, PrintWriter out, PrintWriter err) {
    System.setProperty(
        "vertx.logger-delegate-factory-class-name",
        "io.vertx.core.logging.SLF4JLogDelegateFactory");
    cl.setOut(out);
    cl.setErr(err);
    cl.setParameterExceptionHandler(Main::usageError);
    examplesUnwrapped(cl);
    cl.setExecutionExceptionHandler(
        (e, cmd, parsed) -> {
          if (e instanceof CliException c) {
            // An API's refusal can quote what a client or a build sent.
            cmd.getErr().println("error: " + io.oneshot.api.Visible.lines(c.getMessage()));
            return c.exitCode;
          }
          if (e instanceof io.oneshot.config.ConfigException
              || e instanceof IllegalArgumentException) {
            cmd.getErr().println("error: " + e.getMessage());
            return USAGE;
          }
          cmd.getErr().println("error: " + e);
          e.printStackTrace(cmd.getErr());
          return UNREACHABLE;
        });
    return cl;
  }

  /**
   * Lays out every command's footer itself: a line that starts with a space (an example, an
   * indented list) is printed as written, however long, so that an example copied from an 80-column
   * terminal is still one command; a line of prose is wrapped between words at the help's width.
   * picocli's own footer wrapped both, and put {@code --follow} of an example on a line of its own.
   */
  private static void examplesUnwrapped(CommandLine cl) {
    cl.getHelpSectionMap().put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_FOOTER, Main::footer);
    for (CommandLine sub : cl.getSubcommands().values()) {
      examplesUnwrapped(sub);
    }
  }

  private static String footer(CommandLine.Help help) {
    CommandLine.Model.UsageMessageSpec usage = help.commandSpec().usageMessage();
    StringBuilder out = new StringBuilder();
    for (String line : usage.footer()) {
      if (line.isEmpty() || Character.isWhitespace(line.charAt(0))) {
        out.append(line).append(System.lineSeparator());
      } else {
        out.append(wrap(line, usage.width()));
      }
    }
    return out.toString();
  }

  /** {@code prose} in lines of at most {@code width} characters, broken between words only. */
  static String wrap(String prose, int width) {
    StringBuilder out = new StringBuilder();
    int column = 0;
    for (String word : prose.split(" +")) {
      if (column > 0 && column + 1 + word.length() > width) {
        out.append(System.lineSeparator());
        column = 0;
      } else if (column > 0) {
        out.append(' ');
        column++;
      }
      out.append(word);
      column += word.length();
    }
    return out.append(System.lineSeparator()).toString();
  }

  @Override
  public void run() {
    spec.commandLine().usage(spec.commandLine().getOut());
  }

  /**
   * The root for {@code oneshot provisionerd ...}, which every build's pod starts (the root itself
   * never runs): the same name, options and handlers as {@link Main}, with provisionerd its only
   * subcommand. picocli reads every subcommand's annotations when the tree is built, which was a
   * third of a one-shot provisionerd's CPU before its build began.
   */
  @Command(
      name = "oneshot",
      mixinStandardHelpOptions = true,
      versionProvider = Main.Version.class,
      subcommands = ProvisionerdCommand.class)
  static final class ProvisionerdOnly {}

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      String v = Main.class.getPackage().getImplementationVersion();
      return new String[] {"oneshot " + (v == null ? "(development build)" : v)};
    }
  }
}
