package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The WIGGLE_* connection variables, by the rules of docs/worker-protocol.md, "Connection". */
class ConnectionTest {
  @Test
  void nothingSetIsPlaintextToTheDefaultAddress() {
    Connection c = Connection.fromEnvironment(Map.of());
    assertEquals("127.0.0.1:7233", c.target());
    assertFalse(c.usesTls());
    assertNull(c.bearerToken());
  }

  @Test
  void everyVariableIsRead() {
    Connection c = Connection.fromEnvironment(Map.of(
        "WIGGLE_ADDRESS", "wiggle.internal:7233",
        "WIGGLE_AUTH_TOKEN", "secret",
        "WIGGLE_TLS_SERVER_NAME", "wiggle"));
    assertEquals("wiggle.internal:7233", c.target());
    assertEquals("secret", c.bearerToken());
    assertEquals("wiggle", c.checkedServerName());
    assertTrue(c.usesTls(), "a server name turns TLS on");
  }

  @Test
  void anEmptyVariableCountsAsUnset() {
    Connection c = Connection.fromEnvironment(Map.of(
        "WIGGLE_ADDRESS", "", "WIGGLE_AUTH_TOKEN", "", "WIGGLE_TLS", "", "WIGGLE_TLS_CERT", ""));
    assertEquals("127.0.0.1:7233", c.target());
    assertNull(c.bearerToken());
    assertFalse(c.usesTls());
  }

  @ParameterizedTest
  @ValueSource(strings = {"1", "true", "YES", " on "})
  void wiggleTlsOnIsTls(String value) {
    assertTrue(Connection.fromEnvironment(Map.of("WIGGLE_TLS", value)).usesTls());
  }

  @ParameterizedTest
  @ValueSource(strings = {"0", "false", "No", "off"})
  void wiggleTlsOffIsPlaintext(String value) {
    assertFalse(Connection.fromEnvironment(Map.of("WIGGLE_TLS", value)).usesTls());
  }

  @Test
  void aMalformedWiggleTlsIsRefusedByName() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Connection.fromEnvironment(Map.of("WIGGLE_TLS", "maybe")));
    assertTrue(e.getMessage().startsWith("WIGGLE_TLS=\"maybe\" is not one of"), e.getMessage());
  }

  @Test
  void aCertificateWithoutItsKeyIsRefused() {
    for (String var : new String[] {"WIGGLE_TLS_CERT", "WIGGLE_TLS_KEY"}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> Connection.fromEnvironment(Map.of(var, "/x.pem")));
      assertTrue(e.getMessage().contains("both a client certificate and its key"), var);
    }
  }

  @Test
  void theTokenFileIsReadAndTrimmed(@TempDir Path dir) throws Exception {
    Path file = Files.writeString(dir.resolve("token"), "from-file\n");
    Connection c = Connection.fromEnvironment(Map.of("WIGGLE_AUTH_TOKEN_FILE", file.toString()));
    assertEquals("from-file", c.bearerToken());
    Files.writeString(file, " \n");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Connection.fromEnvironment(Map.of("WIGGLE_AUTH_TOKEN_FILE", file.toString())));
    assertTrue(e.getMessage().endsWith("is empty"), e.getMessage());
  }

  @Test
  void aMissingTokenFileIsRefusedByName(@TempDir Path dir) {
    String missing = dir.resolve("absent").toString();
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Connection.fromEnvironment(Map.of("WIGGLE_AUTH_TOKEN_FILE", missing)));
    assertTrue(e.getMessage().startsWith("cannot read the token file " + missing), e.getMessage());
  }

  @Test
  void aTokenAndATokenFileTogetherAreRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Connection.fromEnvironment(
            Map.of("WIGGLE_AUTH_TOKEN", "a", "WIGGLE_AUTH_TOKEN_FILE", "/t")));
    assertTrue(e.getMessage().contains("not both"), e.getMessage());
  }

  @Test
  void aCallAfterwardsWinsOverItsVariable(@TempDir Path dir) throws Exception {
    Path file = Files.writeString(dir.resolve("token"), "from-file");
    Connection c = Connection.fromEnvironment(Map.of(
            "WIGGLE_AUTH_TOKEN", "env", "WIGGLE_TLS_SERVER_NAME", "env-name"))
        .tokenFile(new File(file.toString()))
        .serverName("explicit");
    assertEquals("from-file", c.bearerToken());
    assertEquals("explicit", c.checkedServerName());
    assertEquals("explicit", Connection.fromEnvironment(Map.of("WIGGLE_AUTH_TOKEN", "env"))
        .token("explicit").bearerToken());
  }
}
