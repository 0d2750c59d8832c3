package io.oneshot.build;

import io.oneshot.config.ConfigException;
import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The encryption keys checked against the database at start (db/020_key_checks.sql): each
 * configured key opens the check it sealed when a dispatcher first started with it, or the start
 * fails saying which key changed and what most often changed it. A key that sealed checks here and
 * is no longer configured is warned of: what it sealed no longer opens.
 */
public final class KeyChecks {
  private static final Logger log = LoggerFactory.getLogger(KeyChecks.class);
  private static final Sql CHECKS = Sql.load("keys/checks");

  /** What a check holds; its value matters less than that it opens. */
  static final String TEXT = "oneshot key check";

  private KeyChecks() {}

  /** Fails with a {@link ConfigException} naming the first configured key that does not open. */
  public static Future<Void> verify(Pool pool, Sealer sealer) {
    List<String> ids = sealer.keyIds();
    List<String> made = new ArrayList<>(ids.size());
    for (String id : ids) {
      made.add(sealer.sealWith(id, TEXT, Sealer.keyCheck(id)));
    }
    return pool.preparedQuery(CHECKS.text())
        .execute(
            Tuple.of((Object) ids.toArray(String[]::new), (Object) made.toArray(String[]::new)))
        .map(
            rows -> {
              List<String> gone = new ArrayList<>();
              for (Row r : rows) {
                String id = r.getString("key_id");
                if (!ids.contains(id)) {
                  gone.add(id);
                  continue;
                }
                boolean opens;
                try {
                  opens = TEXT.equals(sealer.open(r.getString("sealed"), Sealer.keyCheck(id)));
                } catch (Sealer.SealedException e) {
                  opens = false;
                }
                if (!opens) {
                  throw new ConfigException(
                      "encryption key "
                          + id
                          + " is not the key "
                          + id
                          + " this database was sealed with: its secret changed, so no workspace"
                          + " state or sensitive value sealed with it would open. Most often its"
                          + " Secret was made again (the chart generates the key once, at install;"
                          + " a tool that renders the chart on every sync, like Argo CD, makes a"
                          + " new one each time: docs/install.md, \"With Argo CD or Flux\"). Give"
                          + " the dispatcher the key it had; to start over with a new one, give it"
                          + " a new id");
                }
              }
              if (!gone.isEmpty()) {
                log.warn(
                    "Encryption keys {} sealed values in this database and encryption.keys no"
                        + " longer has them: what they sealed does not open. Keep old keys after"
                        + " a new one until nothing is sealed with them.",
                    gone);
              }
              return null;
            });
  }
}
