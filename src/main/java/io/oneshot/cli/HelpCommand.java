package io.oneshot.cli;

import java.io.PrintWriter;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/**
 * {@code oneshot help [COMMAND...]}: the help of the command the whole path names ({@code oneshot
 * help builds list} is {@code oneshot builds list --help}). picocli's own help command read only
 * the path's first word and printed {@code builds}'s help for it.
 */
@Command(
    name = "help",
    header = "Shows a command's help: oneshot help builds list.",
    helpCommand = true,
    description = "Shows the help of the command named, as COMMAND --help does.",
    footer = {"", "Examples:", "  oneshot help", "  oneshot help builds list"})
final class HelpCommand implements CommandLine.IHelpCommandInitializable2, Runnable {
  @Parameters(
      paramLabel = "COMMAND",
      arity = "0..*",
      description = "A command and its subcommands.")
  List<String> path = List.of();

  private CommandLine parent;
  private PrintWriter out;

  @Override
  public void init(
      CommandLine helpCommandLine,
      CommandLine.Help.ColorScheme colorScheme,
      PrintWriter out,
      PrintWriter err) {
    this.parent = helpCommandLine.getParent();
    this.out = out;
  }

  @Override
  public void run() {
    CommandLine at = parent;
    StringBuilder walked = new StringBuilder(parent.getCommandName());
    for (String name : path) {
      CommandLine next = at.getSubcommands().get(name);
      if (next == null) {
        throw new CommandLine.ParameterException(
            at,
            "no command "
                + walked
                + " "
                + name
                + (at.getSubcommands().isEmpty()
                    ? ""
                    : "; its commands are "
                        + String.join(", ", at.getCommandSpec().subcommands().keySet())));
      }
      walked.append(' ').append(name);
      at = next;
    }
    at.usage(out);
    out.flush();
  }
}
