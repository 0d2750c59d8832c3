package io.oneshot.api;

import io.oneshot.build.QueueStore;
import io.oneshot.build.TokenStore.Role;
import java.util.Set;

/**
 * Who makes an API call: the admin token (every route, every action), or an API token with its role
 * and the routes it covers.
 *
 * @param name the token's name ({@code admin} for the admin token): what the audit trail records
 * @param tokenId null for the admin token
 * @param role null for the admin token, which may do everything
 * @param routes the route names it covers today; null: every route
 */
record Caller(String name, Long tokenId, Role role, Set<String> routes) {
  static final Caller ADMIN = new Caller("admin", null, null, null);

  boolean admin() {
    return role == null;
  }

  boolean covers(String route) {
    return routes == null || routes.contains(route);
  }

  /** Whether its role is {@code r} or wider. */
  boolean atLeast(Role r) {
    return role == null || role.atLeast(r);
  }

  /** Whether it may cancel or rerun a build of a route it covers, submitted by {@code token}. */
  boolean mayChange(Long token) {
    return atLeast(Role.OPERATOR) || (atLeast(Role.SUBMITTER) && tokenId.equals(token));
  }

  String roleName() {
    return role == null ? "admin" : role.wire();
  }

  QueueStore.Submitter submitter() {
    return new QueueStore.Submitter(name, tokenId, routes);
  }
}
