package io.oneshot.api;

import static io.oneshot.api.Http.bodyObject;
import static io.oneshot.api.Http.emptyToNull;
import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.json;
import static io.oneshot.api.Http.longParam;
import static io.oneshot.api.Http.rejectUnknownFields;
import static io.oneshot.api.Http.requiredParam;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.AuditStore;
import io.oneshot.build.BuildStore;
import io.oneshot.build.PulumiCheckpoint;
import io.oneshot.build.Runner;
import io.oneshot.build.Sealer;
import io.oneshot.build.StateStore;
import io.oneshot.build.TokenStore.Role;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Future;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;

/**
 * Workspace state: terraform's state uploads from the running attempt ({@code POST
 * /api/v1/runner/state}, fenced to the attempt's bound runner by {@code sql/state/save.sql}), and
 * the versions and states operators read under {@code /api/v1/workspaces}. A workspace is its
 * route's: {@code route} names it where the name alone is on several routes.
 */
final class WorkspaceStateApi {
  private final BuildStore store;
  private final OneshotConfig config;
  private final RunnerApi runners;
  private final Access access;

  WorkspaceStateApi(BuildStore store, OneshotConfig config, RunnerApi runners, Access access) {
    this.store = store;
    this.config = config;
    this.runners = runners;
    this.access = access;
  }

  void mount(Router router) {
    router.post("/api/v1/runner/state").handler(this::upload);
    router.get("/api/v1/workspaces/states").handler(this::stateVersions);
    router.get("/api/v1/workspaces/state").handler(this::workspaceState);
  }

  /** An upload of the workspace's terraform state while the build runs. */
  private void upload(RoutingContext ctx) {
    byte[] hash = RunnerApi.runnerToken(ctx);
    JsonNode body = bodyObject(ctx);
    rejectUnknownFields(body, Set.of("state"));
    StateStore.StateUpload upload =
        upload(body.path("state"), "state", config.limits().maxStateBytes());
    runners.proven(
        ctx, hash, "save state", (runner, attempt) -> upload(ctx, hash, runner, attempt, upload));
  }

  private void upload(
      RoutingContext ctx,
      byte[] hash,
      Runner runner,
      io.oneshot.launch.AttemptRef attempt,
      StateStore.StateUpload upload) {
    store
        .state()
        .saveState(hash, runner.id(), upload, false)
        .onSuccess(
            v -> {
              switch (v) {
                case StateStore.StateSaved.NotRunning n ->
                    runners.refuse(ctx, hash, runner, attempt, "save state");
                case StateStore.StateSaved.Refused r ->
                    fail(
                        ctx,
                        new ApiError(
                            409,
                            "state: " + r.why(),
                            "a state upload must continue this attempt's terraform state",
                            "state"));
                case StateStore.StateSaved.Stored st -> {
                  runners.audit(
                      runner, "save state", st.buildId(), null, "ok", "version " + st.version());
                  Future<?> note = Future.succeededFuture();
                  if (st.note() != null) {
                    note = stateNote(hash, st.note());
                  }
                  note.onComplete(x -> json(ctx, 200, Map.of("version", st.version())));
                }
              }
            })
        .onFailure(ctx::fail);
  }

  /**
   * Checks an uploaded state (a string within the size cap): terraform's state, whose serial and
   * lineage are read without building a tree of the whole document, or Pulumi's checkpoint (an
   * object with {@code version} and {@code checkpoint}, see {@link PulumiCheckpoint}). The build's
   * provisioner decides which one it must be ({@code state/save}).
   */
  static StateStore.StateUpload upload(JsonNode node, String field, long maxStateBytes) {
    if (!node.isTextual()) {
      throw ApiError.badRequest(field, "must be the workspace's state as a string");
    }
    String text = node.asText();
    int bytes = text.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > maxStateBytes) {
      throw new ApiError(
          413,
          field + ": is " + bytes + " bytes; the limit is " + maxStateBytes + " bytes",
          "the limit is limits.maxStateBytes in the dispatcher's configuration",
          field);
    }
    Long serial = null;
    String lineage = null;
    JsonNode checkpoint = null;
    JsonNode version = null;
    // The whole document is read (strictly: no key twice, nothing after it), though only serial
    // and lineage are kept of terraform's: a state that would not load in terraform or Pulumi is
    // refused now, not handed to the workspace's next build.
    String kind = "terraform state";
    try (com.fasterxml.jackson.core.JsonParser p =
        Json.MAPPER
            .getFactory()
            .createParser(text)
            .enable(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)) {
      if (p.nextToken() != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
        throw ApiError.badRequest(
            field, "is not a terraform state or Pulumi checkpoint (a JSON object)");
      }
      while (p.nextToken() == com.fasterxml.jackson.core.JsonToken.FIELD_NAME) {
        String name = p.currentName();
        com.fasterxml.jackson.core.JsonToken value = p.nextToken();
        if (name.equals("serial")) {
          if (value != com.fasterxml.jackson.core.JsonToken.VALUE_NUMBER_INT
              || p.getNumberType() == com.fasterxml.jackson.core.JsonParser.NumberType.BIG_INTEGER
              || p.getLongValue() < 0) {
            throw ApiError.badRequest(
                field, "is not a terraform state: serial must be a non-negative integer");
          }
          serial = p.getLongValue();
        } else if (name.equals("lineage")) {
          if (value != com.fasterxml.jackson.core.JsonToken.VALUE_STRING) {
            throw ApiError.badRequest(field, "is not a terraform state: lineage must be a string");
          }
          lineage = p.getText();
        } else if (name.equals("checkpoint")) {
          kind = "Pulumi checkpoint";
          checkpoint = p.readValueAsTree();
        } else if (name.equals("version")) {
          version = p.readValueAsTree();
        } else {
          p.skipChildren();
        }
      }
      if (p.nextToken() != null) {
        throw ApiError.badRequest(field, "is not a " + kind + ": something follows its object");
      }
    } catch (java.io.IOException e) {
      String why =
          e instanceof com.fasterxml.jackson.core.JsonProcessingException j
              ? Http.problem(j)
              : Visible.text(e.getMessage(), 200);
      throw ApiError.badRequest(field, "is not a " + kind + ": " + why);
    }
    if (checkpoint != null) {
      String problem = PulumiCheckpoint.problem(version, checkpoint);
      if (problem != null) {
        throw ApiError.badRequest(field, "is not a Pulumi checkpoint: " + problem);
      }
      return new StateStore.StateUpload(text, bytes, null, null, StateStore.PULUMI);
    }
    if (serial == null) {
      throw ApiError.badRequest(field, "is not a terraform state: it has no serial");
    }
    return new StateStore.StateUpload(text, bytes, serial, lineage, StateStore.TERRAFORM);
  }

  /**
   * The route of the workspace {@code ws} the caller means, when it may read it: {@code route} when
   * given, else the one route with state of {@code ws} among the caller's (several: a 400 that
   * names them, each the caller's own). A workspace of a route outside the caller's is answered as
   * one that does not exist; the state itself ({@code state}) needs the operator role, a history of
   * versions says no more than the builds the caller can read already. A refusal is answered,
   * audited when {@code entry} is not null, and fails the future.
   */
  private Future<String> readable(
      RoutingContext ctx, String ws, String route, boolean state, AuditStore.Entry entry) {
    Caller caller = Access.caller(ctx);
    if (state && !caller.atLeast(Role.OPERATOR)) {
      return refuse(ctx, entry, access.role(ctx, Role.OPERATOR, "reading workspace state"));
    }
    if (route != null) {
      return caller.covers(route)
          ? Future.succeededFuture(route)
          : refuse(ctx, entry, access.outOfScope("workspace " + ws + " of route " + route));
    }
    return store
        .reads()
        .workspaceRoutes(ws, caller.routes())
        .compose(
            routes -> {
              if (routes.size() == 1) {
                return Future.succeededFuture(routes.iterator().next());
              }
              if (routes.isEmpty()) {
                return refuse(ctx, entry, ApiError.notFound("workspace " + ws));
              }
              return refuse(
                  ctx,
                  entry,
                  new ApiError(
                      400,
                      "route: workspace "
                          + ws
                          + " is on routes "
                          + String.join(", ", routes)
                          + "; say which",
                      "a workspace is its route's: add route=NAME (oneshot workspaces ... --route"
                          + " NAME)",
                      "route"));
            });
  }

  private <T> Future<T> refuse(RoutingContext ctx, AuditStore.Entry entry, ApiError e) {
    if (entry == null) {
      fail(ctx, e);
    } else {
      access.refuseAudited(ctx, entry, e);
    }
    return Future.failedFuture(AdminApi.Answered.INSTANCE);
  }

  private void stateVersions(RoutingContext ctx) {
    String ws = requiredParam(ctx, "workspace");
    String route = emptyToNull(Http.queryText(ctx, "route"));
    readable(ctx, ws, route, false, null)
        .compose(
            r ->
                store
                    .state()
                    .stateVersions(r, ws)
                    .map(list -> Map.of("route", r, "workspace", ws, "versions", list)))
        .onSuccess(answer -> json(ctx, 200, answer))
        .onFailure(e -> answer(ctx, e));
  }

  /**
   * The state itself: the latest version, or {@code version=N}; for recovery and inspection.
   * Audited: who read which version of which route's workspace.
   */
  private void workspaceState(RoutingContext ctx) {
    String ws = requiredParam(ctx, "workspace");
    String route = emptyToNull(Http.queryText(ctx, "route"));
    Long v = longParam(ctx, "version");
    if (v != null && (v < 1 || v > Integer.MAX_VALUE)) {
      throw ApiError.badRequest(
          "version", "must be a state version, from 1 to " + Integer.MAX_VALUE);
    }
    AuditStore.Entry entry =
        AuditStore.Entry.of(Access.caller(ctx).name(), "state-read", null, route)
            .withWorkspace(ws)
            .withDetail(
                v == null ? null : Json.MAPPER.createObjectNode().put("version", v.longValue()));
    readable(ctx, ws, route, true, entry)
        .compose(
            r ->
                store
                    .state()
                    .state(r, ws, v == null ? null : v.intValue())
                    .compose(
                        st ->
                            st.isEmpty()
                                ? Future.succeededFuture(st)
                                : access.audit(entry.withRoute(r)).map(st))
                    .onSuccess(
                        st -> {
                          if (st.isEmpty()) {
                            fail(
                                ctx,
                                ApiError.notFound(
                                    "state of workspace "
                                        + ws
                                        + " of route "
                                        + r
                                        + (v == null ? "" : " at version " + v)));
                          } else {
                            ctx.response()
                                .putHeader("Content-Type", "application/json")
                                .putHeader("Oneshot-Route", r)
                                .end(st.get());
                          }
                        }))
        .onFailure(e -> answer(ctx, e));
  }

  private static void answer(RoutingContext ctx, Throwable e) {
    if (e instanceof Sealer.SealedException s) {
      fail(
          ctx,
          new ApiError(
              500,
              "the state cannot be decrypted: " + s.getMessage(),
              "see encryption.keys in the dispatcher's configuration",
              null));
    } else if (!(e instanceof AdminApi.Answered)) {
      ctx.fail(e);
    }
  }

  /** Writes a note about a stored state (a new lineage) into the build's log. */
  private Future<?> stateNote(byte[] hash, String note) {
    return store
        .runner()
        .tokenState(hash)
        .compose(
            t ->
                t.isEmpty()
                    ? Future.succeededFuture()
                    : store.attempts().systemLog(t.get().id(), t.get().attempt(), "warn", note));
  }
}
