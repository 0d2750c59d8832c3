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
      description = "The admin token (env ONESHOT_TOKEN).")
  String token;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "FORMAT",
      defaultValue = "text",
      description = "text or json (default: ${DEFAULT-VALUE}).")
  Output output;

  ApiClient client() {
    return new ApiClient(url, token);
  }

  boolean json() {
    return output == Output.json;
  }
}
