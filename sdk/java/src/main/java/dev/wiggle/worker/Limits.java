package dev.wiggle.worker;

/** The server's limits when a task does not carry them (an older server). */
final class Limits {
  /** {@code max_payload_bytes} of a server that does not say: 4 MiB. */
  static final long DEFAULT_PAYLOAD_BYTES = 4L * 1024 * 1024;

  private Limits() {}

  static long payload(long maxPayloadBytes) {
    return maxPayloadBytes > 0 ? maxPayloadBytes : DEFAULT_PAYLOAD_BYTES;
  }

  /** {@code max_request_bytes}, or 4 x the payload limit + 1 MiB when the task does not say. */
  static long request(long maxRequestBytes, long maxPayloadBytes) {
    return maxRequestBytes > 0 ? maxRequestBytes : 4 * payload(maxPayloadBytes) + 1024 * 1024;
  }
}
