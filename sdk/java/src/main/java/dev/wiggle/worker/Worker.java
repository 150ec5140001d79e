package dev.wiggle.worker;

import dev.wiggle.proto.v1.EagerDispatch;
import dev.wiggle.proto.v1.EndPollsRequest;
import dev.wiggle.proto.v1.Task;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * A Wiggle pull worker: it long-polls a server for tasks on its queues, runs the handler
 * registered under each task's activity name, and reports back. SERVER tasks run one step each
 * (CompleteTask / FailTask); LOCAL_SYNC and LOCAL_ASYNC tasks start a local run that chains the
 * steps the handback rule allows and reports them through AdvanceRun.
 *
 * <pre>{@code
 * Worker worker = Worker.builder()
 *     .connection(Connection.to("127.0.0.1:7233").token(System.getenv("WIGGLE_AUTH_TOKEN")))
 *     .queues("orders")
 *     .register("validate", (order, step) -> ((ObjectNode) order).put("valid", true))
 *     .registerPredicate("in_stock", (order, step) -> order.path("qty").asInt() <= 10)
 *     .build();
 * worker.runUntilShutdown(); // serves until SIGTERM, then drains
 * }</pre>
 *
 * <p>{@link #close()} drains: polling stops, running steps finish and are reported, local runs
 * hand back what they buffered (reason {@code shutdown}), and tasks received but not started are
 * given back without costing an attempt. What is still held when the drain timeout passes is
 * dropped as in a crash.
 */
public final class Worker implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");
  /** Sent in PollTasks so that operators see which SDK a worker runs. */
  public static final String SDK = "wiggle-java/0.2.0";

  private enum State { NEW, RUNNING, CLOSED }

  private final Env env;
  private final Registry registry;
  private final int concurrency;
  private final long pollWaitMs;
  private final Duration drainTimeout;
  private final ManagedChannel owned;
  private final Slots slots;
  private final ThreadPoolExecutor pool;
  private final Poller poller;
  private final CountDownLatch closed = new CountDownLatch(1);
  private volatile boolean drained;
  private final List<Lease> running = new ArrayList<>();
  private State state = State.NEW;
  private Thread pollerThread;

  private Worker(Builder b) {
    Channel channel;
    if (b.channel != null) {
      owned = null;
      channel = b.channel;
    } else {
      owned = b.connection.open();
      channel = owned;
    }
    if (b.connection != null) {
      channel = b.connection.authorised(channel);
    }
    registry = b.registry;
    concurrency = b.concurrency;
    pollWaitMs = b.pollWait.toMillis();
    drainTimeout = b.drainTimeout;
    Env[] self = new Env[1]; // the Rpc's stop condition reads the Env built with it
    Runnable reconnect = owned == null ? () -> {} : owned::resetConnectBackoff;
    Rpc rpc = new Rpc(channel, b.callTimeout.toMillis(), () -> self[0] != null && self[0].aborted,
        reconnect);
    env = new Env(rpc, registry, b.queues, new LeaseKeeper(rpc), b.localBatchSize, b.workerId);
    self[0] = env;
    slots = new Slots(concurrency);
    pool = new ThreadPoolExecutor(concurrency, concurrency, 60, TimeUnit.SECONDS,
        new LinkedBlockingQueue<>(), Threads.named("wiggle-task"));
    pool.allowCoreThreadTimeOut(true);
    poller = new Poller(env, slots, concurrency, pollWaitMs, SDK, this::submit);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The worker id the server records as lease owner. */
  public String id() {
    return env.workerId;
  }

  public List<String> queues() {
    return env.queues;
  }

  /** The registered activity names, sorted (what PollTasks tells the server). */
  public List<String> activities() {
    return registry.names();
  }

  /** Begins polling in the background; returns this worker. */
  public synchronized Worker start() {
    if (state == State.CLOSED) {
      throw new IllegalStateException("a closed worker cannot start again");
    }
    if (state == State.NEW) {
      state = State.RUNNING;
      pollerThread = Threads.named("wiggle-poller").newThread(poller);
      pollerThread.start();
      LOG.log(Level.INFO, "worker " + id() + " serving " + env.queues);
    }
    return this;
  }

  /**
   * Starts, then serves until SIGTERM or SIGINT, drains, and returns: true when the drain
   * completed (a {@code main} that then returns exits 0, as a stopped service should, rather than
   * the 143 of a JVM killed by SIGTERM). Any other stop of the JVM (System.exit) drains in a
   * shutdown hook the JVM waits for.
   */
  public boolean runUntilShutdown() throws InterruptedException {
    start();
    Thread hook = new Thread(this::close, "wiggle-drain");
    Runtime.getRuntime().addShutdownHook(hook);
    Signals.onStop(() -> new Thread(this::close, "wiggle-drain").start());
    closed.await();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException e) {
      // the JVM is already shutting down: the hook is what closed the worker
    }
    return drained;
  }

  /** Drains within the builder's drain timeout (default 30 s); see {@link #close(Duration)}. */
  @Override
  public void close() {
    close(drainTimeout);
  }

  /**
   * Stops polling and drains: running steps finish and are reported, local runs hand back what
   * they buffered, tasks not started are given back. If {@code timeout} passes first, what is
   * still held is dropped as in a crash (handlers are interrupted, leases given back where that
   * is safe, else left to expire). Idempotent; true when the drain completed.
   */
  public boolean close(Duration timeout) {
    synchronized (this) {
      if (state == State.CLOSED) {
        return true;
      }
      boolean wasRunning = state == State.RUNNING;
      state = State.CLOSED;
      if (!wasRunning) {
        shutdownResources();
        return true;
      }
    }
    boolean drained = false;
    try {
      // Ordering: draining is announced before polling stops, so a task a poll still returns is
      // given back (or, on an older server, run to its first boundary), never left leased.
      env.draining = true;
      poller.stop(!endPolls());
      pollerThread.join(pollWaitMs + env.rpc.callTimeoutMs());
      drained = slots.awaitIdle(Math.max(0, timeout.toMillis()));
      if (!drained) {
        LOG.log(Level.WARNING, "worker " + id() + ": drain timed out; dropping what is still held");
        env.aborted = true;
        synchronized (running) {
          for (Lease l : running) {
            l.cancelled.set(true);
          }
        }
        pool.shutdownNow(); // interrupts handlers
        pool.awaitTermination(2, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      env.aborted = true;
    } finally {
      shutdownResources();
      LOG.log(Level.INFO, "worker " + id() + " stopped");
      this.drained = drained;
      closed.countDown();
    }
    return drained;
  }

  /** Asks the server to end this worker's open polls now; false when it could not. */
  private boolean endPolls() {
    try {
      env.rpc.call(WiggleRpc.END_POLLS, EndPollsRequest.newBuilder().setWorkerId(id()).build(),
          2_000, 0);
      return true;
    } catch (RpcException e) {
      return false; // an older server: cancel the poll instead
    }
  }

  private void shutdownResources() {
    pool.shutdown();
    if (env.spans != null) {
      env.spans.shutdown(); // buffered spans go out, two seconds at most
    }
    env.keeper.stop();
    if (owned != null) {
      owned.shutdown();
      try {
        if (!owned.awaitTermination(2, TimeUnit.SECONDS)) {
          owned.shutdownNow();
        }
      } catch (InterruptedException e) {
        owned.shutdownNow();
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Reserves a slot for the eager first task of an instance this process starts; null when the
   * worker is not running or has no free slot (then start the instance without eager dispatch).
   */
  public EagerSlot reserveEagerSlot() {
    synchronized (this) {
      if (state != State.RUNNING || env.stopping()) {
        return null;
      }
    }
    return slots.tryTake() ? new EagerSlot(this) : null;
  }

  /** The EagerDispatch a StartInstance carries so that its first task comes to this worker. */
  public EagerDispatch eagerDispatch() {
    return EagerDispatch.newBuilder().setWorkerId(id()).addAllQueues(env.queues)
        .addAllActivities(registry.names()).build();
  }

  boolean dispatchEager(Task task) {
    Lease lease = TaskRunner.hold(env, task, System.nanoTime());
    if (env.stopping()) {
      // Closing since the reservation: give the task back rather than start it.
      TaskRunner.release(env, task, lease, "shutdown");
      env.keeper.drop(lease);
      slots.give(1);
      return false;
    }
    submit(task, lease);
    return true;
  }

  void giveSlot() {
    slots.give(1);
  }

  /** Runs a task that holds a slot (taken by the poller or an eager reservation). */
  private void submit(Task task, Lease lease) {
    try {
      pool.execute(() -> {
        synchronized (running) {
          running.add(lease);
        }
        try {
          TaskRunner.run(env, task, lease);
        } finally {
          synchronized (running) {
            running.remove(lease);
          }
          slots.give(1);
        }
      });
    } catch (RejectedExecutionException e) {
      // Closed without draining: the lease expires and the server redelivers.
      env.keeper.drop(lease);
      slots.give(1);
    }
  }

  /** Configures a {@link Worker}. Every setting has a default but the server to talk to. */
  public static final class Builder {
    private static final Pattern PRINTABLE = Pattern.compile("[\\x21-\\x7e]+");

    private Connection connection;
    private Channel channel;
    private final List<String> queues = new ArrayList<>();
    private int concurrency = 16;
    private int localBatchSize = 64;
    private String workerId;
    private Duration pollWait = Duration.ofSeconds(10);
    private Duration callTimeout = Duration.ofSeconds(30);
    private Duration drainTimeout = Duration.ofSeconds(30);
    private final Registry registry = new Registry();

    private Builder() {}

    /** The server to serve (address, token, TLS). */
    public Builder connection(Connection connection) {
      this.connection = connection;
      return this;
    }

    /** Shorthand for {@code connection(Connection.to(target))}: plaintext, no token. */
    public Builder target(String target) {
      return connection(Connection.to(target));
    }

    /**
     * A channel the caller owns (and shuts down), instead of a connection the worker opens; a
     * connection given as well only adds its token.
     */
    public Builder channel(Channel channel) {
      this.channel = channel;
      return this;
    }

    /** The queues served. Default {@code default}. */
    public Builder queues(String... queues) {
      this.queues.clear();
      for (String q : queues) {
        this.queues.add(q);
      }
      return this;
    }

    /** The most tasks (SERVER steps or local runs) in flight at once. Default 16. */
    public Builder concurrency(int concurrency) {
      this.concurrency = concurrency;
      return this;
    }

    /** LOCAL_ASYNC results buffered before a mid-run flush. Default 64. */
    public Builder localBatchSize(int size) {
      this.localBatchSize = size;
      return this;
    }

    /** The lease owner's name, at most 200 characters. Default {@code <host>:<pid>:<random>}. */
    public Builder workerId(String id) {
      this.workerId = id;
      return this;
    }

    /** How long the server may hold one poll open. Default 10 s. */
    public Builder pollWait(Duration d) {
      this.pollWait = d;
      return this;
    }

    /** The deadline of every other call. Default 30 s. */
    public Builder callTimeout(Duration d) {
      this.callTimeout = d;
      return this;
    }

    /** How long {@link Worker#close()} waits for running work. Default 30 s. */
    public Builder drainTimeout(Duration d) {
      this.drainTimeout = d;
      return this;
    }

    /** Binds a task (or combine, or apply) activity. */
    public Builder register(String name, Activity activity) {
      if (activity == null) {
        throw new IllegalArgumentException("register '" + name + "' with a null activity");
      }
      registry.add(name, new Registry.Handler(activity, null));
      return this;
    }

    /** Binds a predicate activity (filter, choice arm, loop while). */
    public Builder registerPredicate(String name, PredicateActivity predicate) {
      if (predicate == null) {
        throw new IllegalArgumentException("register '" + name + "' with a null predicate");
      }
      registry.add(name, new Registry.Handler(null, predicate));
      return this;
    }

    /** Binds every {@link WiggleActivity} method of {@code bean}. */
    public Builder activities(Object bean) {
      registry.addAnnotated(bean);
      return this;
    }

    public Worker build() {
      if (connection == null && channel == null) {
        throw new IllegalArgumentException("a worker needs a connection (or a channel)");
      }
      if (queues.isEmpty()) {
        queues.add("default");
      }
      for (String q : queues) {
        if (q == null || q.isEmpty() || q.length() > 200) {
          throw new IllegalArgumentException("a queue name is 1 to 200 characters");
        }
      }
      if (concurrency < 1) {
        throw new IllegalArgumentException("concurrency must be at least 1, not " + concurrency);
      }
      if (localBatchSize < 1) {
        throw new IllegalArgumentException("localBatchSize must be at least 1, not " + localBatchSize);
      }
      if (workerId == null || workerId.isEmpty()) {
        workerId = defaultId();
      }
      if (workerId.length() > 200 || !PRINTABLE.matcher(workerId).matches()) {
        throw new IllegalArgumentException(
            "a worker id is 1 to 200 printable ASCII characters without spaces");
      }
      if (pollWait.isNegative() || pollWait.isZero() || callTimeout.isNegative() || callTimeout.isZero()) {
        throw new IllegalArgumentException("pollWait and callTimeout must be positive");
      }
      return new Worker(this);
    }

    private static String defaultId() {
      String host;
      try {
        host = InetAddress.getLocalHost().getHostName();
      } catch (UnknownHostException e) {
        host = "localhost";
      }
      return String.format("%s:%d:%08x", host, ProcessHandle.current().pid(),
          ThreadLocalRandom.current().nextInt());
    }
  }
}
