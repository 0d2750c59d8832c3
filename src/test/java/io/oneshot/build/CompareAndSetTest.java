package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.StoreFixture;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every UPDATE of a build row is a compare-and-set on (build, attempt, status): its WHERE names the
 * build and its attempt (by id and attempt, or by the attempt's token) and the status it expects,
 * either itself or through a row it locked in the same statement. A statement that leaves one out
 * fails here, unless it is one of the few listed below with the reason it may.
 */
class CompareAndSetTest {

  /** Statements that may leave out a guard, with why. */
  private static final Map<String, String> EXEMPT =
      Map.of(
          "queue/claim",
          "claims the pending rows it locked (FOR UPDATE SKIP LOCKED) and starts their next attempt",
          "queue/cancel",
          "an operator's cancel applies to whichever attempt is current, under the row's lock",
          "routes/fail-orphaned",
          "fails pending builds of removed routes, which have no attempt running",
          "attempts/system-log",
          "only numbers a log line (log_seq); a note may follow the build's end",
          "state/save",
          "records the version it stored on the row locked by the guarded \"b\"",
          "queue/submitted",
          "notes the submitter of a build made in the same transaction, which no one else sees"
              + " before the commit");

  private static final Pattern UPDATE =
      Pattern.compile("UPDATE\\s+oneshot\\.builds\\b", Pattern.CASE_INSENSITIVE);
  private static final Pattern CTE =
      Pattern.compile(
          "(\\w+)\\s+AS\\s+(?:NOT\\s+)?(?:MATERIALIZED\\s+)?\\(", Pattern.CASE_INSENSITIVE);
  private static final Pattern KEY =
      Pattern.compile(
          "\\b(id\\s*=\\s*(\\$1\\b|\\w+\\.id\\b)|token_hash\\s*=\\s*(\\$1\\b|\\w+\\.token_hash\\b))",
          Pattern.CASE_INSENSITIVE);
  private static final Pattern ATTEMPT =
      Pattern.compile("\\b(attempt\\s*=|token_hash\\s*=)", Pattern.CASE_INSENSITIVE);
  private static final Pattern STATUS =
      Pattern.compile("\\bstatus\\s*(=|(NOT\\s+)?IN\\s*\\()", Pattern.CASE_INSENSITIVE);

  @Test
  void everyUpdateOfABuildIsACompareAndSetOnBuildAttemptAndStatus() {
    new StoreFixture("routes: [{name: a}]").close(); // loads every store's statements
    List<String> updates = new ArrayList<>();
    List<String> unguarded = new ArrayList<>();
    for (Sql s : Sql.loaded()) {
      String text =
          withoutComments(s.name().equals("queue/claim") ? s.with(Map.of("batch", 1)) : s.text());
      Matcher m = UPDATE.matcher(text);
      if (!m.find()) {
        continue;
      }
      updates.add(s.name());
      if (EXEMPT.containsKey(s.name())) {
        continue;
      }
      String guards = guards(text, m.end());
      List<String> missing = new ArrayList<>();
      if (!KEY.matcher(guards).find()) {
        missing.add(
            "the build (id = $1, id = <list>.id, token_hash = $1 or token_hash = <list>.token_hash)");
      }
      if (!ATTEMPT.matcher(guards).find()) {
        missing.add("the attempt");
      }
      if (!STATUS.matcher(guards).find()) {
        missing.add("the status");
      }
      if (!missing.isEmpty()) {
        unguarded.add(s.name() + " does not name " + String.join(", ", missing));
      }
    }
    assertThat(updates).as("statements that update builds").hasSizeGreaterThanOrEqualTo(14);
    assertThat(updates).containsAll(EXEMPT.keySet());
    assertThat(unguarded).isEmpty();
  }

  /**
   * The WHERE of the UPDATE starting at {@code from}, with the WHERE of every CTE it joins (a row
   * the statement locked and checked first).
   */
  private static String guards(String text, int from) {
    String where = clause(text, from);
    Map<String, String> ctes = ctes(text);
    StringBuilder out = new StringBuilder(where);
    for (Map.Entry<String, String> c : ctes.entrySet()) {
      if (Pattern.compile("\\b" + c.getKey() + "\\.id\\b").matcher(where).find()) {
        out.append(' ').append(clause(c.getValue(), 0));
      }
    }
    return out.toString();
  }

  /** From the first WHERE at the top level after {@code from} to the end of that level. */
  private static String clause(String text, int from) {
    int depth = 0;
    int start = -1;
    for (int i = from; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '(') {
        depth++;
      } else if (c == ')') {
        if (depth == 0) {
          return start < 0 ? "" : text.substring(start, i);
        }
        depth--;
      } else if (depth == 0
          && start < 0
          && text.regionMatches(true, i, "WHERE", 0, 5)
          && (i == 0 || !Character.isLetterOrDigit(text.charAt(i - 1)))) {
        start = i;
      }
    }
    return start < 0 ? "" : text.substring(start);
  }

  /** The statement's CTEs by name, each with its body. */
  private static Map<String, String> ctes(String text) {
    Map<String, String> out = new LinkedHashMap<>();
    Matcher m = CTE.matcher(text);
    while (m.find()) {
      int depth = 1;
      int i = m.end();
      while (i < text.length() && depth > 0) {
        char c = text.charAt(i++);
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      }
      out.put(m.group(1).toLowerCase(Locale.ROOT), text.substring(m.end(), i - 1));
    }
    return out;
  }

  private static String withoutComments(String sql) {
    return sql.replaceAll("--[^\n]*", "");
  }
}
