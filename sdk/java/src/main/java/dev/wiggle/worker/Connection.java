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

/**
 * How to reach a Wiggle server: its address, a bearer token, TLS. One Connection serves a worker
 * and a {@link dev.wiggle.client.WiggleClient} alike.
 *
 * <pre>{@code
 * Connection c = Connection.to("wiggle.internal:7233")
 *     .token(System.getenv("WIGGLE_AUTH_TOKEN"))
 *     .tls(new File("ca.pem"))                          // verify the server
 *     .clientCertificate(new File("me.pem"), new File("me.key")); // mutual TLS
 * }</pre>
 */
public final class Connection {
  /** The largest message sent or received (as the Python worker allows). */
  static final int MAX_MESSAGE = 64 * 1024 * 1024;

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
    this.tls = true;
    this.cert = certPem;
    this.key = keyPem;
    return this;
  }

  /** The name to check in the server's certificate, when it is not the target's host. */
  public Connection serverName(String name) {
    this.serverName = name == null || name.isEmpty() ? null : name;
    return this;
  }

  /**
   * A Connection from the environment, as the CLI reads it: {@code WIGGLE_ADDRESS} (default
   * {@code 127.0.0.1:7233}), {@code WIGGLE_AUTH_TOKEN}, {@code WIGGLE_TLS} (1/true), {@code
   * WIGGLE_TLS_CA}, {@code WIGGLE_TLS_CERT}, {@code WIGGLE_TLS_KEY}, {@code
   * WIGGLE_TLS_SERVER_NAME}.
   */
  public static Connection fromEnvironment() {
    String address = System.getenv("WIGGLE_ADDRESS");
    Connection c = to(address == null || address.isEmpty() ? "127.0.0.1:7233" : address)
        .token(System.getenv("WIGGLE_AUTH_TOKEN"));
    String flag = System.getenv("WIGGLE_TLS");
    if (flag != null && (flag.equals("1") || flag.equalsIgnoreCase("true") || flag.equalsIgnoreCase("yes"))) {
      c.tls();
    }
    String ca = System.getenv("WIGGLE_TLS_CA");
    if (ca != null && !ca.isEmpty()) {
      c.tls(new File(ca));
    }
    String cert = System.getenv("WIGGLE_TLS_CERT");
    String key = System.getenv("WIGGLE_TLS_KEY");
    if (cert != null && !cert.isEmpty() && key != null && !key.isEmpty()) {
      c.clientCertificate(new File(cert), new File(key));
    }
    return c.serverName(System.getenv("WIGGLE_TLS_SERVER_NAME"));
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
