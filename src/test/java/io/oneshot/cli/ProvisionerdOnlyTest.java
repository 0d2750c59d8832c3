package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import picocli.CommandLine;

/**
 * {@code oneshot provisionerd ...} runs on a tree of that command alone (a build's pod starts it);
 * what it prints and returns must be what the whole tree gives for the same arguments.
 */
class ProvisionerdOnlyTest {

  private record Run(int code, String out, String err) {}

  private static Run run(boolean whole, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    PrintWriter o = new PrintWriter(out, true);
    PrintWriter e = new PrintWriter(err, true);
    CommandLine cl = whole ? Main.commandLine(o, e) : Main.commandLine(o, e, args);
    int code = cl.execute(args);
    return new Run(code, out.toString(), err.toString());
  }

  static List<List<String>> arguments() throws Exception {
    Path token = Files.createTempFile("token", "");
    Files.delete(token);
    // Help, version, an unknown option, an option without its value, no token (a test's
    // environment has none), a token file that cannot be read, a blank API URL.
    return List.of(
        List.of("provisionerd", "--help"),
        List.of("provisionerd", "--version"),
        List.of("provisionerd", "--bogus"),
        List.of("provisionerd", "--work-dir"),
        List.of("provisionerd", "--api-url", "http://127.0.0.1:1"),
        List.of("provisionerd", "--api-url", "http://127.0.0.1:1", "--token-file", token + ""),
        List.of("provisionerd", "--api-url", " "));
  }

  @ParameterizedTest
  @MethodSource("arguments")
  void printsAndReturnsWhatTheWholeTreeDoes(List<String> args) {
    String[] a = args.toArray(String[]::new);
    Run whole = run(true, a);
    Run alone = run(false, a);
    assertThat(alone).isEqualTo(whole);
  }

  @ParameterizedTest
  @MethodSource("arguments")
  void runsOnATreeOfProvisionerdAlone(List<String> args) {
    PrintWriter none = new PrintWriter(new StringWriter());
    CommandLine cl = Main.commandLine(none, none, args.toArray(String[]::new));
    assertThat(cl.getSubcommands().keySet()).containsExactly("provisionerd");
    CommandLine whole = Main.commandLine(none, none, "submit");
    assertThat(whole.getSubcommands()).containsKey("provisionerd");
    assertThat(whole.getSubcommands().size()).isGreaterThan(1);
  }
}
