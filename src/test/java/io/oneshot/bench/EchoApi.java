package io.oneshot.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.kubernetes.client.vertx.VertxHttpClientFactory;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.http.Dispatcher;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import io.fabric8.mockwebserver.http.Response;
import io.fabric8.mockwebserver.http.WebSocket;
import io.fabric8.mockwebserver.http.WebSocketListener;
import io.oneshot.api.Json;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A Kubernetes API server that does as little as one can: objects are kept in a hash map by path, a
 * create answers with the object it was sent (given a uid) and tells the watchers of its kind, a
 * patch or delete answers success, a list answers nothing. Every answer takes the same time however
 * many objects exist, so a launcher measured against it shows its own cost: the client, its
 * requests and the informers' events, and the dispatcher, without the CRUD mock's store (which
 * scans every object on each request) in the way.
 *
 * <p>What it leaves out: a real API server's own cost (admission, etcd), and the Pod events a real
 * cluster would add. Given {@link ApiSeats}, it answers each request other than a watch at the time
 * they give, or 429 when they turn it away: a busy API server's pace, without its CPU.
 */
final class EchoApi implements LaunchBench.Api {
  final AtomicLong requests = new AtomicLong();
  private final KubernetesMockServer server;

  /** The pace of its answers, or null to answer at once. */
  final ApiSeats seats;

  EchoApi() {
    this(null);
  }

  EchoApi(ApiSeats seats) {
    this.seats = seats;
    server =
        new KubernetesMockServer(
            new Context(), new MockWebServer(), new HashMap<>(), new Echo(), false);
    server.init();
  }

  @Override
  public KubernetesClient clientFor(Vertx vertx) {
    return server.createClient(b -> b.withHttpClientFactory(new VertxHttpClientFactory(vertx)));
  }

  @Override
  public void close() {
    server.destroy();
  }

  private final class Echo extends Dispatcher {
    private final Map<String, String> objects = new ConcurrentHashMap<>();
    private final Map<String, List<WebSocket>> watchers = new ConcurrentHashMap<>();

    @Override
    public MockResponse dispatch(RecordedRequest r) {
      requests.incrementAndGet();
      String path = r.getPath();
      String collection = path.replaceFirst("\\?.*", "");
      if (path.contains("watch=true")) {
        return new MockResponse()
            .withWebSocketUpgrade(
                new WebSocketListener() {
                  @Override
                  public void onOpen(WebSocket ws, Response response) {
                    watchers.computeIfAbsent(collection, k -> new CopyOnWriteArrayList<>()).add(ws);
                  }
                });
      }
      if (seats == null) {
        return answer(r, path, collection);
      }
      long now = System.nanoTime();
      long due = seats.admit(now);
      if (due < 0) {
        // What API Priority and Fairness answers a request it turns away: a header and plain text
        // (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go,
        // tooManyRequests).
        return new MockResponse()
            .setResponseCode(429)
            .setHeader("Content-Type", "text/plain; charset=utf-8")
            .setHeader("Retry-After", "1")
            .setBody("Too many requests, please try again later.\n");
      }
      MockResponse answer = answer(r, path, collection);
      Duration wait = Duration.ofNanos(due - now);
      return wait.toMillis() < 1 ? answer : answer.setBodyDelay(wait);
    }

    private MockResponse answer(RecordedRequest r, String path, String collection) {
      return switch (r.getMethod()) {
        case "POST" -> {
          JsonNode obj = Json.tree(r.getUtf8Body());
          ObjectNode meta = (ObjectNode) obj.path("metadata");
          meta.put("uid", UUID.randomUUID().toString());
          meta.put("resourceVersion", "1");
          meta.put("creationTimestamp", Instant.now().toString());
          String body = obj.toString();
          objects.put(collection + "/" + meta.path("name").asText(), body);
          String event = "{\"type\":\"ADDED\",\"object\":" + body + "}";
          watchers.getOrDefault(collection, List.of()).forEach(ws -> ws.send(event));
          yield json(201, body);
        }
        case "GET" -> {
          if (path.contains("?")) {
            yield json(200, list(path));
          }
          String obj = objects.get(collection);
          yield obj == null ? json(404, status(404)) : json(200, obj);
        }
        case "DELETE" -> {
          objects.remove(collection);
          yield json(200, status(200));
        }
        default -> json(200, status(200));
      };
    }

    /** An empty list of whatever the path names (jobs, pods or secrets). */
    private static String list(String path) {
      String kind =
          path.contains("/jobs") ? "JobList" : path.contains("/pods") ? "PodList" : "SecretList";
      String apiVersion = path.startsWith("/apis/batch/v1/") ? "batch/v1" : "v1";
      return "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}"
          .formatted(apiVersion, kind);
    }

    private static String status(int code) {
      return "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"status\":\"%s\",\"code\":%d}"
          .formatted(code < 400 ? "Success" : "Failure", code);
    }

    private static MockResponse json(int code, String body) {
      return new MockResponse()
          .setResponseCode(code)
          .setHeader("Content-Type", "application/json")
          .setBody(body);
    }
  }
}
