/** The gRPC seam: real grpc-js calls to an in-process server, sizes, settings from the environment. */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { descriptor } from "../src/gen/descriptor.js";
import { headerBytes, stepEntryBytes } from "../src/local-run.js";
import { CHANNEL_OPTIONS, Code, connectionFromEnv, connectionWithEnv, GrpcApi, LOADER_OPTIONS, RpcError, type StepResult } from "../src/rpc.js";

const definition = protoLoader.fromJSON(descriptor as never, LOADER_OPTIONS);
const service = definition["wiggle.v1.Wiggle"] as grpc.ServiceDefinition;

describe("AdvanceRun sizes", () => {
  it("are the protobuf encoding's, as every SDK computes them", () => {
    const serialize = (service["AdvanceRun"] as grpc.MethodDefinition<object, object>).requestSerialize;
    const cases: StepResult[][] = [
      [],
      [{ nodeId: "a", context: Buffer.alloc(0) }],
      [{ nodeId: "a", context: Buffer.from("x".repeat(300)) }, { nodeId: "é-p", predicate: false }],
      [{ nodeId: "p", predicate: true }, { nodeId: "c", failure: { message: "m", nonRetryable: true, errorType: "E" } }],
      [{ nodeId: "big", context: Buffer.alloc(70_000, 120) }],
    ];
    for (const steps of cases) {
      // (protobufjs writes a field set to "" or false where proto3 leaves it out; the sizes are
      // proto3's, as Go's proto.Size and Python's ByteSize count them, so no field here is.)
      for (const [taskId, lease] of [["t-1", "lease"], ["ü".repeat(200), "l".repeat(130)]] as const) {
        const real = serialize({ taskId, lease, steps }).length;
        const ours = headerBytes(taskId, lease) + steps.reduce((n, s) => n + stepEntryBytes(s), 0);
        assert.equal(ours, real, JSON.stringify(steps).slice(0, 80));
      }
    }
  });
});

describe("settings", () => {
  it("keep client pings rarer than the Python server's 5-minute minimum and reconnect fast", () => {
    assert.ok((CHANNEL_OPTIONS["grpc.keepalive_time_ms"] as number) > 5 * 60_000);
    assert.equal(CHANNEL_OPTIONS["grpc.keepalive_permit_without_calls"], 0);
    assert.ok((CHANNEL_OPTIONS["grpc.max_reconnect_backoff_ms"] as number) <= 5_000);
  });

  it("come from the WIGGLE_* environment names the other SDKs read", () => {
    assert.deepEqual(connectionFromEnv({}), { address: "127.0.0.1:7233", token: undefined, tokenFile: undefined, tls: false });
    assert.deepEqual(
      connectionFromEnv({
        WIGGLE_ADDRESS: "h:1",
        WIGGLE_AUTH_TOKEN_FILE: "/t",
        WIGGLE_TLS_CA: "/ca.pem",
        WIGGLE_TLS_CERT: "/c.pem",
        WIGGLE_TLS_KEY: "/k.pem",
        WIGGLE_TLS_SERVER_NAME: "wiggle.internal",
      }),
      {
        address: "h:1",
        token: undefined,
        tokenFile: "/t",
        tls: { ca: "/ca.pem", cert: "/c.pem", key: "/k.pem", serverName: "wiggle.internal" },
      },
    );
    assert.deepEqual(connectionFromEnv({ WIGGLE_TLS: "true" }).tls, { ca: undefined, cert: undefined, key: undefined, serverName: undefined });
    assert.throws(() => new GrpcApi({ token: "a", tokenFile: "/x" }), /not both/);
    assert.throws(() => new GrpcApi({ tls: { cert: "/c.pem" } }), /both a client certificate and its key/);
    assert.throws(() => new GrpcApi({ tls: { ca: "/no/such/ca.pem" } }), /cannot read the TLS CA \/no\/such\/ca.pem/);
  });

  it("read WIGGLE_TLS strictly, and any TLS file or name turns TLS on", () => {
    for (const v of ["1", "true", "YES", " on "]) {
      assert.notEqual(connectionFromEnv({ WIGGLE_TLS: v }).tls, false, v);
    }
    for (const v of ["0", "false", "No", "off", ""]) {
      assert.equal(connectionFromEnv({ WIGGLE_TLS: v }).tls, false, v);
    }
    assert.throws(() => connectionFromEnv({ WIGGLE_TLS: "maybe" }), /WIGGLE_TLS="maybe" is not one of 1, true/);
    assert.deepEqual(connectionFromEnv({ WIGGLE_TLS_KEY: "/k.pem" }).tls, { ca: undefined, cert: undefined, key: "/k.pem", serverName: undefined });
    assert.throws(() => new GrpcApi(connectionFromEnv({ WIGGLE_TLS_KEY: "/k.pem" })), /both a client certificate and its key/);
    assert.deepEqual(connectionFromEnv({ WIGGLE_ADDRESS: "", WIGGLE_AUTH_TOKEN: "" }), connectionFromEnv({}));
  });

  it("let what is given win over its variable, the rest coming from the environment", () => {
    const env = {
      WIGGLE_ADDRESS: "env:1",
      WIGGLE_AUTH_TOKEN: "env-token",
      WIGGLE_AUTH_TOKEN_FILE: "/env/token",
      WIGGLE_TLS_CA: "/env-ca.pem",
      WIGGLE_TLS_SERVER_NAME: "env-name",
    };
    // A bare address keeps the environment's token and TLS.
    assert.deepEqual(connectionWithEnv("explicit:2", { WIGGLE_AUTH_TOKEN: "env-token", WIGGLE_TLS: "1" }), {
      address: "explicit:2",
      token: "env-token",
      tokenFile: undefined,
      tls: { ca: undefined, cert: undefined, key: undefined, serverName: undefined },
    });
    // A token given ignores both token variables; TLS given keeps the files and name it leaves unset.
    assert.deepEqual(connectionWithEnv({ token: "explicit", tls: { serverName: "own" } }, env), {
      address: "env:1",
      token: "explicit",
      tokenFile: undefined,
      tls: { ca: "/env-ca.pem", cert: undefined, key: undefined, serverName: "own" },
    });
    assert.equal(connectionWithEnv({ tls: false }, env).tls, false);
    assert.deepEqual(connectionWithEnv(undefined, env), connectionFromEnv(env));
    assert.throws(() => new GrpcApi(connectionWithEnv(undefined, env)), /not both/);
  });
});

describe("calls over gRPC", () => {
  let server: grpc.Server;
  let address = "";
  const seen: { method: string; auth: string[]; deadline: number }[] = [];

  before(async () => {
    server = new grpc.Server();
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const name of Object.keys(service)) {
      handlers[name] = (call: grpc.ServerUnaryCall<Record<string, unknown>, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        seen.push({
          method: name,
          auth: call.metadata.get("authorization").map(String),
          deadline: Number(call.getDeadline()) - Date.now(),
        });
        if (name === "CompleteTask") {
          const md = new grpc.Metadata();
          md.set("wiggle-error-code", "STALE_LEASE");
          cb({ code: grpc.status.FAILED_PRECONDITION, details: "not your lease", metadata: md });
          return;
        }
        if (name === "Heartbeat") {
          cb(null, { leaseExpiresAtMs: 1_700_000_060_000, instanceStatus: "RUNNING", serverNowMs: 1_700_000_000_000 });
          return;
        }
        cb(null, {});
      };
    }
    server.addService(service, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e === null ? resolve(p) : reject(e))),
    );
    address = `127.0.0.1:${port}`;
  });

  after(() => server.forceShutdown());

  it("carry the bearer token and a deadline, and decode answers", async () => {
    const api = new GrpcApi({ address, token: "s3cret" });
    const resp = await api.heartbeat({ taskId: "t", lease: "l", nodeId: "a" }, { timeoutMs: 7_000 });
    assert.equal(resp.instanceStatus, "RUNNING");
    assert.equal(resp.leaseExpiresAtMs - resp.serverNowMs, 60_000);
    const last = seen.at(-1);
    assert.deepEqual(last?.auth, ["Bearer s3cret"]);
    assert.ok((last?.deadline ?? 0) > 5_000 && (last?.deadline ?? 0) <= 7_000);
    api.close();
  });

  it("reject with the status and wiggle-error-code", async () => {
    const api = new GrpcApi({ address });
    await assert.rejects(api.completeTask({ taskId: "t", lease: "l", seq: 1 }, { timeoutMs: 5_000 }), (e: unknown) => {
      assert.ok(e instanceof RpcError);
      assert.equal(e.code, Code.FAILED_PRECONDITION);
      assert.equal(e.errorCode, "STALE_LEASE");
      assert.equal(e.message, "not your lease");
      return true;
    });
    const gone = new GrpcApi({ address: "127.0.0.1:1" });
    await assert.rejects(gone.endPolls({ workerId: "w" }, { timeoutMs: 2_000 }), (e: unknown) => {
      assert.ok(e instanceof RpcError && (e.code === Code.UNAVAILABLE || e.code === Code.DEADLINE_EXCEEDED));
      return true;
    });
    api.close();
    gone.close();
  });

  it("are cancelled by their signal", async () => {
    const api = new GrpcApi({ address: "127.0.0.1:1" });
    const stop = new AbortController();
    const call = api.pollTasks({ workerId: "w", waitMs: 10_000 }, { timeoutMs: 60_000, signal: stop.signal });
    stop.abort();
    await assert.rejects(call, (e: unknown) => e instanceof RpcError && e.code === Code.CANCELLED);
    api.close();
  });
});
