package io.oneshot.cli;

import picocli.CommandLine.Option;

/** {@code --url}, {@code --token} and {@code -o}: what every client command takes. */
final class ClientOptions {
  enum Output {
    text,
    json
  }

  @Option(
      names = "--url",
      paramLabel = "URL",
      defaultValue = "${env:ONESHOT_URL:-http://127.0.0.1:8080}",
      // The URL on a line of its own: help text is wrapped at its dots and colon too.
      description = {"The oneshot API (env ONESHOT_URL).", "Default: ${DEFAULT-VALUE}"})
  String url;

  @Option(
      names = "--token",
      paramLabel = "TOKEN",
      defaultValue = "${env:ONESHOT_TOKEN}",
      description =
          "An API token (env ONESHOT_TOKEN): the admin token, or one oneshot tokens create made, whose"
              + " role and routes decide what it may do.")
  String token;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "FORMAT",
      defaultValue = "text",
      description = "text or json (default: ${DEFAULT-VALUE}).")
  Output output;

  @Option(
      names = "--utc",
      defaultValue = "${env:ONESHOT_UTC:-false}",
      description = "Times in UTC (env ONESHOT_UTC=true); else in this machine's time zone.")
  boolean utc;

  /** The zone times are printed in ({@link Text#at}). */
  java.time.ZoneId zone() {
    return utc ? java.time.ZoneOffset.UTC : java.time.ZoneId.systemDefault();
  }

  ApiClient client() {
    return new ApiClient(url, token);
  }

  boolean json() {
    return output == Output.json;
  }
}
