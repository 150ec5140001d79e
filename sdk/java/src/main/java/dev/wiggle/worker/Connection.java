package dev.wiggle.worker;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Locale;
import java.util.Map;

/**
 * How to reach a Wiggle server: its address, a bearer token, TLS. One Connection serves a worker
 * and a {@link dev.wiggle.client.WiggleClient} alike.
 *
 * <pre>{@code
 * Connection c = Connection.to("wiggle.internal:7233")
 *     .tokenFile(new File("/run/secrets/wiggle-token"))
 *     .tls(new File("ca.pem"))                          // verify the server
 *     .clientCertificate(new File("me.pem"), new File("me.key")); // mutual TLS
 * }</pre>
 *
 * <p>Or {@link #fromEnvironment()}, from the {@code WIGGLE_*} variables every SDK reads.
 */
public final class Connection {
  /** The largest message sent or received (as the Python worker allows). */
  static final int MAX_MESSAGE = 64 * 1024 * 1024;

  /** The server a connection from an environment without {@code WIGGLE_ADDRESS} reaches. */
  public static final String DEFAULT_ADDRESS = "127.0.0.1:7233";

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final String target;
  private String token;
  private boolean tls;
  private File ca;
  private File cert;
  private File key;
  private String serverName;

  private Connection(String target) {
    this.target = target;
  }

  /** A plaintext connection to {@code host:port} (any gRPC target). */
  public static Connection to(String target) {
    if (target == null || target.isBlank()) {
      throw new IllegalArgumentException("a Wiggle server address (host:port) is needed");
    }
    return new Connection(target);
  }

  /** Sent as {@code authorization: Bearer <token>} on every call; null or empty: none. */
  public Connection token(String token) {
    this.token = token == null || token.isEmpty() ? null : token;
    return this;
  }

  /**
   * The token held in {@code file}, read now (surrounding whitespace dropped): preferred to
   * {@link #token(String)} on a shared host, where a command line shows in the process list. It
   * and {@code token} are one setting: the last call wins.
   */
  public Connection tokenFile(File file) {
    String text;
    try {
      text = Files.readString(file.toPath(), StandardCharsets.UTF_8).strip();
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read the token file " + file + ": " + e, e);
    }
    if (text.isEmpty()) {
      throw new IllegalArgumentException("the token file " + file + " is empty");
    }
    this.token = text;
    return this;
  }

  /** TLS, trusting the system's roots. */
  public Connection tls() {
    this.tls = true;
    return this;
  }

  /** TLS, trusting the PEM certificate(s) in {@code caPem}. */
  public Connection tls(File caPem) {
    this.tls = true;
    this.ca = caPem;
    return this;
  }

  /** Mutual TLS: present this PEM certificate chain and its PEM (PKCS#8) private key. */
  public Connection clientCertificate(File certPem, File keyPem) {
    if (certPem == null || keyPem == null) {
      throw new IllegalArgumentException(
          "mutual TLS needs both a client certificate and its key (WIGGLE_TLS_CERT and"
              + " WIGGLE_TLS_KEY), or neither");
    }
    this.tls = true;
    this.cert = certPem;
    this.key = keyPem;
    return this;
  }

  /** TLS, checking this name in the server's certificate, when it is not the target's host. */
  public Connection serverName(String name) {
    this.serverName = name == null || name.isEmpty() ? null : name;
    this.tls |= this.serverName != null;
    return this;
  }

  /**
   * A Connection from the {@code WIGGLE_*} connection variables, by the rules every Wiggle SDK
   * shares (docs/worker-protocol.md, "Connection"): {@code WIGGLE_ADDRESS}, {@code
   * WIGGLE_AUTH_TOKEN} or {@code WIGGLE_AUTH_TOKEN_FILE}, {@code WIGGLE_TLS} and the {@code
   * WIGGLE_TLS_*} files and name. Calls made on it afterwards override what a variable gave.
   *
   * @throws IllegalArgumentException naming the variable: a {@code WIGGLE_TLS} neither on nor
   *     off, both token variables, a certificate without its key, an unreadable token file
   */
  public static Connection fromEnvironment() {
    return fromEnvironment(System.getenv());
  }

  static Connection fromEnvironment(Map<String, String> env) {
    Connection c = to(variable(env, "WIGGLE_ADDRESS", DEFAULT_ADDRESS));
    String token = variable(env, "WIGGLE_AUTH_TOKEN", null);
    String tokenFile = variable(env, "WIGGLE_AUTH_TOKEN_FILE", null);
    if (token != null && tokenFile != null) {
      throw new IllegalArgumentException(
          "set WIGGLE_AUTH_TOKEN or WIGGLE_AUTH_TOKEN_FILE, not both");
    }
    c.token(token);
    if (tokenFile != null) {
      c.tokenFile(new File(tokenFile));
    }
    String flag = variable(env, "WIGGLE_TLS", null);
    if (flag != null && tlsFlag(flag)) {
      c.tls();
    }
    String ca = variable(env, "WIGGLE_TLS_CA", null);
    if (ca != null) {
      c.tls(new File(ca));
    }
    String cert = variable(env, "WIGGLE_TLS_CERT", null);
    String key = variable(env, "WIGGLE_TLS_KEY", null);
    if (cert != null || key != null) {
      c.clientCertificate(cert == null ? null : new File(cert), key == null ? null : new File(key));
    }
    return c.serverName(variable(env, "WIGGLE_TLS_SERVER_NAME", null));
  }

  /** The variable's value; empty counts as unset. */
  private static String variable(Map<String, String> env, String name, String fallback) {
    String v = env.get(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  private static boolean tlsFlag(String value) {
    switch (value.strip().toLowerCase(Locale.ROOT)) {
      case "1", "true", "yes", "on":
        return true;
      case "0", "false", "no", "off":
        return false;
      default:
        throw new IllegalArgumentException("WIGGLE_TLS=\"" + value
            + "\" is not one of 1, true, yes, on (TLS) or 0, false, no, off");
    }
  }

  /** Whether this connection speaks TLS. */
  boolean usesTls() {
    return tls;
  }

  /** The bearer token, or null. */
  String bearerToken() {
    return token;
  }

  /** The name checked in the server's certificate, or null for the target's host. */
  String checkedServerName() {
    return serverName;
  }

  public String target() {
    return target;
  }

  /** Opens a channel; whoever opens it shuts it down. */
  public ManagedChannel open() {
    ChannelCredentials creds = InsecureChannelCredentials.create();
    if (tls) {
      TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
      try {
        if (ca != null) {
          b.trustManager(ca);
        }
        if (cert != null) {
          b.keyManager(cert, key);
        }
      } catch (IOException e) {
        throw new IllegalArgumentException("cannot read a TLS file: " + e.getMessage(), e);
      }
      creds = b.build();
    }
    ManagedChannelBuilder<?> b = Grpc.newChannelBuilder(target, creds)
        .maxInboundMessageSize(MAX_MESSAGE);
    if (serverName != null) {
      b.overrideAuthority(serverName);
    }
    return b.build();
  }

  /** {@code channel} with this connection's bearer token on every call. */
  Channel authorised(Channel channel) {
    if (token == null) {
      return channel;
    }
    String value = "Bearer " + token;
    return ClientInterceptors.intercept(channel, new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(
          MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
          @Override
          public void start(Listener<R> listener, Metadata headers) {
            headers.put(AUTHORIZATION, value);
            super.start(listener, headers);
          }
        };
      }
    });
  }

  /** Public for {@link dev.wiggle.client.WiggleClient}: the channel with the token. */
  public Channel withToken(Channel channel) {
    return authorised(channel);
  }
}
