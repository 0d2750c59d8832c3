package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.oneshot.testing.StoreFixture;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The named statement files: all of them used, all of them parsing, none missing. */
class SqlTest {
  private StoreFixture f;

  @AfterEach
  void close() {
    if (f != null) {
      f.close();
    }
  }

  @Test
  void everyStatementFileIsLoadedByAStoreAndEveryLoadedStatementHasAFile()
      throws IOException, URISyntaxException {
    f = new StoreFixture("routes: [{name: a}]");
    // The main resources' directory (the test resources have an sql/ of their own).
    Path dir =
        Path.of(Sql.class.getResource("sql/queue/enqueue.sql").toURI()).getParent().getParent();
    List<String> files;
    try (Stream<Path> all = Files.walk(dir)) {
      files =
          all.filter(p -> p.toString().endsWith(".sql"))
              .map(p -> dir.relativize(p).toString().replace('\\', '/').replaceFirst("\\.sql$", ""))
              .filter(n -> !n.startsWith("test/"))
              .sorted()
              .toList();
    }
    assertThat(Sql.loaded()).extracting(Sql::name).containsExactlyElementsOf(files);
  }

  @Test
  void everyStatementParsesAgainstTheSchema() {
    f = new StoreFixture("routes: [{name: a}]");
    Database.await(Sql.checkAll(f.db.pool()));
  }

  @Test
  void everyStatementSaysWhatItDoes() {
    f = new StoreFixture("routes: [{name: a}]");
    for (Sql s : Sql.loaded()) {
      String text = s.name().equals("queue/claim") ? s.with(Map.of("batch", 1)) : s.text();
      assertThat(text).as(s.name()).startsWith("-- ");
    }
  }

  /** Each statement is short enough to be prepared once per connection by the pool's client. */
  @Test
  void everyStatementFitsThePreparedStatementCache() {
    f = new StoreFixture("routes: [{name: a}]");
    for (Sql s : Sql.loaded()) {
      String text = s.name().equals("queue/claim") ? s.with(Map.of("batch", 10_000)) : s.text();
      assertThat(text.length()).as(s.name()).isLessThan(Database.STATEMENT_SQL_LIMIT);
    }
  }

  @Test
  void aStatementThatDoesNotParseFailsTheCheckByName() {
    f = new StoreFixture("routes: [{name: a}]");
    Sql broken = Sql.read("test/broken");
    assertThatThrownBy(() -> Database.await(Sql.check(f.db.pool(), List.of(broken))))
        .hasMessageContaining("SQL statement test/broken")
        .hasMessageContaining("io/oneshot/build/sql/test/broken.sql")
        .hasMessageContaining("no_such_column");
  }

  @Test
  void aMissingStatementFailsWhenLoadedNamingTheFile() {
    assertThatThrownBy(() -> Sql.load("queue/no-such-statement"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("queue/no-such-statement")
        .hasMessageContaining("io/oneshot/build/sql/queue/no-such-statement.sql");
    assertThat(Sql.loaded()).extracting(Sql::name).doesNotContain("queue/no-such-statement");
  }

  @Test
  void placeholdersMustBeFilledIn() {
    Sql claim = Sql.read("queue/claim");
    assertThatThrownBy(claim::text).hasMessageContaining("placeholders");
    assertThatThrownBy(() -> claim.with(Map.of())).hasMessageContaining("{{batch}}");
    assertThat(claim.with(Map.of("batch", 7))).contains("LIMIT 7").doesNotContain("{{");
  }
}
