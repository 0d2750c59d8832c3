package io.oneshot.api;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.module.SimpleModule;
import io.oneshot.build.BuildState;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * The one JSON mapper of the wire format: camelCase, times as RFC 3339 UTC with milliseconds,
 * states in lowercase, unknown fields refused when reading.
 */
public final class Json {
  public static final DateTimeFormatter TIME =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  public static final ObjectMapper MAPPER = create();

  private Json() {}

  private static ObjectMapper create() {
    SimpleModule wire = new SimpleModule("oneshot-wire");
    wire.addSerializer(
        Instant.class,
        new JsonSerializer<>() {
          @Override
          public void serialize(Instant value, JsonGenerator gen, SerializerProvider serializers)
              throws IOException {
            gen.writeString(TIME.format(value));
          }
        });
    wire.addSerializer(
        BuildState.class,
        new JsonSerializer<>() {
          @Override
          public void serialize(BuildState value, JsonGenerator gen, SerializerProvider p)
              throws IOException {
            gen.writeString(value.wire());
          }
        });
    JsonMapper mapper =
        JsonMapper.builder()
            .addModule(wire)
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
            .build();
    mapper
        .getFactory()
        .setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(200).build());
    return mapper;
  }

  /**
   * The reader of request bodies: stricter than {@link #MAPPER}, it refuses a key given twice in an
   * object and anything after the value (a second object, trailing text), so that what a client
   * sent is read one way only.
   */
  static final com.fasterxml.jackson.databind.ObjectReader REQUEST =
      MAPPER
          .reader()
          .with(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
          .with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  public static String write(Object value) {
    try {
      return MAPPER.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static JsonNode tree(String json) {
    if (json == null) {
      return null;
    }
    try {
      return MAPPER.readTree(json);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }
}
