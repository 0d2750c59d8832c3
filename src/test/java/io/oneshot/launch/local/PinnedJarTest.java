package io.oneshot.launch.local;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Attempts run from a copy of the dispatcher's jar: rewriting the jar it started from (a build in
 * its checkout) leaves running attempts' jar alone.
 */
class PinnedJarTest {
  @TempDir Path tmp;

  @Test
  void aJarIsCopiedOncePerVersionAndDirectoriesAreKept() throws Exception {
    Path jar = tmp.resolve("oneshot.jar");
    Files.writeString(jar, "version one");
    Path classes = Files.createDirectories(tmp.resolve("classes"));
    Path dir = tmp.resolve("run/.jars");

    List<String> first = LocalCommand.pinned(List.of(jar.toString(), classes.toString()), dir);
    assertThat(first.get(1)).isEqualTo(classes.toString());
    Path copy = Path.of(first.get(0));
    assertThat(copy.getParent()).isEqualTo(dir);
    assertThat(copy.getFileName().toString()).matches("oneshot-[0-9a-f]{1,8}\\.jar");
    assertThat(Files.readString(copy)).isEqualTo("version one");
    assertThat(LocalCommand.pinned(List.of(jar.toString()), dir)).containsExactly(first.get(0));

    // The jar rewritten under a running attempt: its copy stays; the next start copies anew.
    Files.writeString(jar, "version two");
    Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(5)));
    Path second = Path.of(LocalCommand.pinned(List.of(jar.toString()), dir).get(0));
    assertThat(second).isNotEqualTo(copy);
    assertThat(Files.readString(second)).isEqualTo("version two");
    assertThat(Files.readString(copy)).isEqualTo("version one");

    // A copy of another version unchanged for a day goes at the next start.
    Files.setLastModifiedTime(copy, FileTime.from(Instant.now().minusSeconds(2 * 86_400)));
    LocalCommand.pinned(List.of(jar.toString()), dir);
    assertThat(copy).doesNotExist();
    assertThat(second).exists();
    try (var files = Files.list(dir)) {
      assertThat(files.map(p -> p.getFileName().toString()).toList())
          .as("no partial copy left")
          .containsExactly(second.getFileName().toString());
    }
  }
}
