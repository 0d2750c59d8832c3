package io.oneshot.testing.k8s;

import java.util.Arrays;
import java.util.List;

/** What RBAC calls a request to the API server: its group, resource and verb. */
public final class Rbac {
  private Rbac() {}

  /**
   * "group/resource verb" for a request: {@code GET /apis/batch/v1/namespaces/a/jobs?watch=true} is
   * "batch/jobs watch", {@code PATCH /api/v1/namespaces/a/secrets/x} is "/secrets patch".
   */
  public static String access(String method, String pathAndQuery) {
    int q = pathAndQuery.indexOf('?');
    String path = q < 0 ? pathAndQuery : pathAndQuery.substring(0, q);
    String query = q < 0 ? "" : pathAndQuery.substring(q + 1);
    List<String> seg = Arrays.asList(path.replaceFirst("^/", "").split("/"));
    String group;
    List<String> rest;
    if (seg.get(0).equals("api")) {
      group = "";
      rest = seg.subList(2, seg.size());
    } else if (seg.get(0).equals("apis")) {
      group = seg.get(1);
      rest = seg.subList(3, seg.size());
    } else {
      return "non-resource " + path + " " + method.toLowerCase();
    }
    if (!rest.isEmpty() && rest.get(0).equals("namespaces") && rest.size() >= 3) {
      rest = rest.subList(2, rest.size());
    }
    String resource = rest.get(0) + (rest.size() > 2 ? "/" + rest.get(2) : "");
    boolean named = rest.size() > 1;
    String verb =
        switch (method) {
          case "GET" ->
              named
                  ? "get"
                  : Arrays.asList(query.split("&")).contains("watch=true") ? "watch" : "list";
          case "POST" -> "create";
          case "PUT" -> "update";
          case "PATCH" -> "patch";
          case "DELETE" -> named ? "delete" : "deletecollection";
          default -> method.toLowerCase();
        };
    return group + "/" + resource + " " + verb;
  }
}
