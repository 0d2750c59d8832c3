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
      TokensCommand.class,
      AuditCommand.class,
      CommandLine.HelpCommand.class
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

  public static int execute(String... args) {
    if (Runtime.version().feature() >= 24) {
      // Netty's direct memory access through sun.misc.Unsafe warns on JDK 24+; go without it.
      System.setProperty("io.netty.noUnsafe", "true");
    }
    PrintWriter out = new PrintWriter(System.out, true);
    PrintWriter err = new PrintWriter(System.err, true);
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
    // picocli words some messages "Value for option option '--tag' ...".
    err.println("error: " + e.getMessage().replace("option option", "option"));
    CommandLine.UnmatchedArgumentException.printSuggestions(e, err);
    err.println("Try '" + cmd.getCommandSpec().qualifiedName() + " --help' for more.");
    err.flush();
    return USAGE;
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
