package io.oneshot.api;

/**
 * A refused request: the HTTP status and the body {@code {error, detail, field}} the API answers
 * with. {@code error} names the field when there is one; {@code detail} says how to fix it.
 */
public final class ApiError extends RuntimeException {
  private final int status;
  private final String detail;
  private final String field;

  public ApiError(int status, String error, String detail, String field) {
    super(error);
    this.status = status;
    this.detail = detail;
    this.field = field;
  }

  public static ApiError badRequest(String field, String rule) {
    return new ApiError(400, field + ": " + rule, null, field);
  }

  public static ApiError notFound(String what) {
    return new ApiError(404, what + " not found", null, null);
  }

  public int status() {
    return status;
  }

  public String detail() {
    return detail;
  }

  public String field() {
    return field;
  }
}
