package dev.wiggle.graph;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;

/**
 * A compiled flow as a worker sees it: its identity, its mode and its nodes by id. Read one with
 * {@link GraphParser#parse(byte[])} from the bytes {@code GetDefinition} returns.
 *
 * @param name the flow name
 * @param version {@code sha256:<64 hex>} of the canonical bytes
 * @param execution the mode the flow declares
 * @param start the first node
 * @param nodes every node by id
 */
public record Graph(
    String name, String version, ExecutionMode execution, String start, Map<String, Node> nodes) {

  /** The node with this id, or null. */
  public Node node(String id) {
    return nodes.get(id);
  }

  /** The version of canonical graph bytes: {@code "sha256:"} and the hex of their SHA-256. */
  public static String versionOf(byte[] canonical) {
    try {
      byte[] sum = MessageDigest.getInstance("SHA-256").digest(canonical);
      return "sha256:" + HexFormat.of().formatHex(sum);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }

  /** {@link #versionOf(byte[])} of a string's UTF-8 bytes. */
  public static String versionOf(String canonical) {
    return versionOf(canonical.getBytes(StandardCharsets.UTF_8));
  }
}
