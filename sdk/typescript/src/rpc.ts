/**
 * The worker's one I/O seam: the calls it makes on a Wiggle server, as promises that reject with
 * an {@link RpcError}, and the gRPC client behind them (@grpc/grpc-js, the service loaded by
 * @grpc/proto-loader from the descriptor scripts/gen.mjs generates at build time).
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { readFileSync } from "node:fs";

import { descriptor } from "./gen/descriptor.js";
import type { Logger } from "./log.js";
import type { AdvanceRunRequest } from "./gen/proto/wiggle/v1/AdvanceRunRequest.js";
import type { AdvanceRunResponse__Output } from "./gen/proto/wiggle/v1/AdvanceRunResponse.js";
import type { CompleteTaskRequest } from "./gen/proto/wiggle/v1/CompleteTaskRequest.js";
import type { Definition__Output } from "./gen/proto/wiggle/v1/Definition.js";
import type { EndPollsRequest } from "./gen/proto/wiggle/v1/EndPollsRequest.js";
import type { EndPollsResponse__Output } from "./gen/proto/wiggle/v1/EndPollsResponse.js";
import type { FailTaskRequest } from "./gen/proto/wiggle/v1/FailTaskRequest.js";
import type { GetDefinitionRequest } from "./gen/proto/wiggle/v1/GetDefinitionRequest.js";
import type { HeartbeatRequest } from "./gen/proto/wiggle/v1/HeartbeatRequest.js";
import type { HeartbeatResponse__Output } from "./gen/proto/wiggle/v1/HeartbeatResponse.js";
import type { PollTasksRequest } from "./gen/proto/wiggle/v1/PollTasksRequest.js";
import type { PollTasksResponse__Output } from "./gen/proto/wiggle/v1/PollTasksResponse.js";
import type { ReleaseTaskRequest } from "./gen/proto/wiggle/v1/ReleaseTaskRequest.js";
import type { ReportBatchRequest } from "./gen/proto/wiggle/v1/ReportBatchRequest.js";
import type { ReportBatchResponse__Output } from "./gen/proto/wiggle/v1/ReportBatchResponse.js";
import type { StartInstanceRequest } from "./gen/proto/wiggle/v1/StartInstanceRequest.js";
import type { StartInstanceResponse__Output } from "./gen/proto/wiggle/v1/StartInstanceResponse.js";
import type { TaskReportResponse__Output } from "./gen/proto/wiggle/v1/TaskReportResponse.js";

export type { Task__Output as Task } from "./gen/proto/wiggle/v1/Task.js";
export type { StepResult } from "./gen/proto/wiggle/v1/StepResult.js";
export type {
  AdvanceRunRequest,
  CompleteTaskRequest,
  EndPollsRequest,
  FailTaskRequest,
  GetDefinitionRequest,
  HeartbeatRequest,
  PollTasksRequest,
  ReleaseTaskRequest,
  ReportBatchRequest,
  StartInstanceRequest,
};
export type {
  AdvanceRunResponse__Output as AdvanceRunResponse,
  Definition__Output as Definition,
  EndPollsResponse__Output as EndPollsResponse,
  HeartbeatResponse__Output as HeartbeatResponse,
  PollTasksResponse__Output as PollTasksResponse,
  ReportBatchResponse__Output as ReportBatchResponse,
  StartInstanceResponse__Output as StartInstanceResponse,
  TaskReportResponse__Output as TaskReportResponse,
};
export type { TaskReportAnswer__Output as TaskReportAnswer } from "./gen/proto/wiggle/v1/TaskReportAnswer.js";

/** How proto-loader maps messages; proto-loader-gen-types writes the types with the same. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

/** Per-call options: the deadline, and a signal that cancels the call. */
export interface CallOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
}

/** The calls a worker makes. {@link GrpcApi} is the real one; tests use in-memory fakes. */
export interface WiggleApi {
  pollTasks(req: PollTasksRequest, opts: CallOptions): Promise<PollTasksResponse__Output>;
  endPolls(req: EndPollsRequest, opts: CallOptions): Promise<EndPollsResponse__Output>;
  getDefinition(req: GetDefinitionRequest, opts: CallOptions): Promise<Definition__Output>;
  heartbeat(req: HeartbeatRequest, opts: CallOptions): Promise<HeartbeatResponse__Output>;
  completeTask(req: CompleteTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output>;
  failTask(req: FailTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output>;
  releaseTask(req: ReleaseTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output>;
  advanceRun(req: AdvanceRunRequest, opts: CallOptions): Promise<AdvanceRunResponse__Output>;
  /** Several reports in one call (optional: without it, each report goes alone). */
  reportBatch?(req: ReportBatchRequest, opts: CallOptions): Promise<ReportBatchResponse__Output>;
  /** Starts an instance (optional: only {@link Worker.startInstance} uses it). */
  startInstance?(req: StartInstanceRequest, opts: CallOptions): Promise<StartInstanceResponse__Output>;
  close(): void;
}

/** The reports, by their field in TaskReport, and the RPC each is on its own. */
export const REPORT_RPCS = {
  complete: "CompleteTask",
  fail: "FailTask",
  advance: "AdvanceRun",
  release: "ReleaseTask",
} as const;
export type ReportKind = keyof typeof REPORT_RPCS;

/** The encoded size of report `req` as its own RPC sends it (the real serializer's count). */
export function reportBytes(kind: ReportKind, req: unknown): number {
  const method = wiggleService().service[REPORT_RPCS[kind]];
  if (method === undefined) {
    throw new Error(`the service has no ${REPORT_RPCS[kind]}`);
  }
  return method.requestSerialize(req).length;
}

/** gRPC status codes the worker tells apart (the numbers are gRPC's). */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ABORTED: 10,
  FAILED_PRECONDITION: 9,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
  PERMISSION_DENIED: 7,
} as const;

/** A failed call: its gRPC status and Wiggle's `wiggle-error-code`, when the server sent one. */
export class RpcError extends Error {
  override name = "RpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly errorCode = "",
  ) {
    super(message);
  }

  static of(e: unknown): RpcError {
    if (e instanceof RpcError) {
      return e;
    }
    const s = e as Partial<grpc.ServiceError>;
    if (typeof s.code === "number") {
      const wiggleCode = s.metadata?.get("wiggle-error-code")[0];
      return new RpcError(s.code, s.details ?? s.message ?? "", typeof wiggleCode === "string" ? wiggleCode : "");
    }
    return new RpcError(Code.UNKNOWN, e instanceof Error ? e.message : String(e));
  }
}

/** The call may succeed later: the server is unreachable, or no answer came in time. */
export function retryable(e: RpcError): boolean {
  return e.code === Code.UNAVAILABLE || e.code === Code.DEADLINE_EXCEEDED;
}

/**
 * No answer from the server: unreachable, no answer in time, or a call that a proxy or the
 * transport ended (CANCELLED, ABORTED; Wiggle's server sends neither, and a call this worker
 * cancelled itself is no answer either: callers check their own signal). A report's fate is
 * unknown.
 */
export function unanswered(e: RpcError): boolean {
  return retryable(e) || e.code === Code.CANCELLED || e.code === Code.ABORTED;
}

/**
 * The "back off" kind of docs/worker-protocol.md's error table: a report with this error has an
 * unknown fate, or the server failed on it; it is resent unchanged, with the same seq, which the
 * server never applies twice.
 */
export function resendable(e: RpcError): boolean {
  return unanswered(e) || e.code === Code.INTERNAL || e.code === Code.UNKNOWN;
}

/** The lease is not the worker's any more (docs/worker-protocol.md, "Errors"). */
export function leaseLost(e: RpcError): boolean {
  return e.code === Code.FAILED_PRECONDITION || e.code === Code.NOT_FOUND;
}

/** TLS settings: trust `ca` (PEM; else the system's roots), present `cert` and `key` (mTLS). */
export interface TlsOptions {
  /** PEM CA bundle to verify the server with (a path, or the PEM itself as a Buffer). */
  readonly ca?: string | Buffer | undefined;
  /** PEM client certificate chain for mutual TLS. */
  readonly cert?: string | Buffer | undefined;
  /** Its PEM private key. */
  readonly key?: string | Buffer | undefined;
  /** The name to check in the server's certificate, when not the address's host. */
  readonly serverName?: string | undefined;
}

/** How to reach a Wiggle server. */
export interface ConnectionOptions {
  /** `host:port` (any gRPC target). Default `127.0.0.1:7233`. */
  readonly address?: string | undefined;
  /** Sent as `authorization: Bearer <token>` on every call. */
  readonly token?: string | undefined;
  /** A file holding the token (read once, at start); preferred to `token` on a shared host. */
  readonly tokenFile?: string | undefined;
  /** Connect with TLS: `true` trusts the system's roots. */
  readonly tls?: TlsOptions | boolean | undefined;
}

/** The default server address, as the CLI's. */
export const DEFAULT_ADDRESS = "127.0.0.1:7233";
/** The largest message received: a poll answer may carry many tasks of 4 MiB contexts. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Channel settings for a long-polling worker on a Python (gRPC core) server. The server refuses
 * client pings more often than every 5 minutes (`too_many_pings` GOAWAY after two): keepalive
 * pings go every 6 minutes, only while a call is open (a poll always is), which still finds a
 * dead connection that no error announces. Reconnects back off from 100 ms to 5 s, so a
 * restarted server is served again within seconds (grpc-js waits up to 2 minutes by default).
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.keepalive_time_ms": 6 * 60_000,
  "grpc.keepalive_timeout_ms": 20_000,
  "grpc.keepalive_permit_without_calls": 0,
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 5_000,
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  "grpc.max_send_message_length": -1,
  "grpc.enable_retries": 0,
};

/** `WIGGLE_TLS` read strictly: a value that is neither on nor off is a mistake to report. */
function tlsFlag(v: string | undefined): boolean {
  if (v === undefined || v === "") {
    return false;
  }
  const word = v.trim().toLowerCase();
  if (["1", "true", "yes", "on"].includes(word)) {
    return true;
  }
  if (["0", "false", "no", "off"].includes(word)) {
    return false;
  }
  throw new Error(`WIGGLE_TLS=${JSON.stringify(v)} is not one of 1, true, yes, on (TLS) or 0, false, no, off`);
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

/**
 * Connection settings from the `WIGGLE_*` connection variables, with the defaults and rules
 * every SDK shares (docs/worker-protocol.md, "Connection"): `WIGGLE_ADDRESS`,
 * `WIGGLE_AUTH_TOKEN` or `WIGGLE_AUTH_TOKEN_FILE`, `WIGGLE_TLS`, and the `WIGGLE_TLS_*` files
 * and name (any of which turns TLS on). A `WIGGLE_TLS` neither on nor off throws, naming it.
 */
export function connectionFromEnv(env: NodeJS.ProcessEnv = process.env): ConnectionOptions {
  const ca = nonEmpty(env["WIGGLE_TLS_CA"]);
  const cert = nonEmpty(env["WIGGLE_TLS_CERT"]);
  const key = nonEmpty(env["WIGGLE_TLS_KEY"]);
  const serverName = nonEmpty(env["WIGGLE_TLS_SERVER_NAME"]);
  const on = tlsFlag(env["WIGGLE_TLS"]);
  const tls = on || ca !== undefined || cert !== undefined || key !== undefined || serverName !== undefined;
  return {
    address: nonEmpty(env["WIGGLE_ADDRESS"]) ?? DEFAULT_ADDRESS,
    token: nonEmpty(env["WIGGLE_AUTH_TOKEN"]),
    tokenFile: nonEmpty(env["WIGGLE_AUTH_TOKEN_FILE"]),
    tls: tls ? { ca, cert, key, serverName } : false,
  };
}

/**
 * `explicit` (a `host:port`, or options) with what it leaves unset taken from the environment:
 * a setting given wins over its variable; a token or a token file given ignores both token
 * variables; `tls: false` ignores every TLS variable, `tls: true` or an object keeps the TLS
 * files and name it does not set.
 */
export function connectionWithEnv(
  explicit: ConnectionOptions | string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ConnectionOptions {
  const given: ConnectionOptions = typeof explicit === "string" ? { address: explicit } : (explicit ?? {});
  const fromEnv = connectionFromEnv(env);
  const ownToken = given.token !== undefined || given.tokenFile !== undefined;
  return {
    address: given.address ?? fromEnv.address,
    token: ownToken ? given.token : fromEnv.token,
    tokenFile: ownToken ? given.tokenFile : fromEnv.tokenFile,
    tls: mergeTls(given.tls, fromEnv.tls),
  };
}

function mergeTls(given: TlsOptions | boolean | undefined, fromEnv: TlsOptions | boolean | undefined): TlsOptions | boolean {
  if (given === undefined || given === false) {
    return given ?? fromEnv ?? false;
  }
  const own: TlsOptions = given === true ? {} : given;
  const base: TlsOptions = typeof fromEnv === "object" ? fromEnv : {};
  return {
    ca: own.ca ?? base.ca,
    cert: own.cert ?? base.cert,
    key: own.key ?? base.key,
    serverName: own.serverName ?? base.serverName,
  };
}

function pem(v: string | Buffer | undefined, what: string): Buffer | null {
  if (v === undefined) {
    return null;
  }
  if (Buffer.isBuffer(v)) {
    return v;
  }
  try {
    return readFileSync(v);
  } catch (e) {
    throw new Error(`cannot read the TLS ${what} ${v}: ${(e as Error).message}`);
  }
}

/** The bearer token of `c`: `token`, or the first line of `tokenFile`; both is a mistake. */
export function tokenOf(c: ConnectionOptions): string | undefined {
  if (c.token !== undefined && c.tokenFile !== undefined) {
    throw new Error("give a token or a token file (WIGGLE_AUTH_TOKEN or WIGGLE_AUTH_TOKEN_FILE), not both");
  }
  if (c.tokenFile === undefined) {
    return nonEmpty(c.token);
  }
  let text: string;
  try {
    text = readFileSync(c.tokenFile, "utf8");
  } catch (e) {
    throw new Error(`cannot read the token file ${c.tokenFile}: ${(e as Error).message}`);
  }
  const token = text.trim();
  if (token === "") {
    throw new Error(`the token file ${c.tokenFile} is empty`);
  }
  return token;
}

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;
type UnaryMethod = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: Callback<unknown>) => grpc.ClientUnaryCall;

let serviceConstructor: grpc.ServiceClientConstructor | undefined;

function wiggleService(): grpc.ServiceClientConstructor {
  if (serviceConstructor === undefined) {
    const def = protoLoader.fromJSON(descriptor as unknown as protobufJsonRoot, LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      wiggle: { v1: { Wiggle: grpc.ServiceClientConstructor } };
    };
    serviceConstructor = pkg.wiggle.v1.Wiggle;
  }
  return serviceConstructor;
}

type protobufJsonRoot = Parameters<typeof protoLoader.fromJSON>[0];

/** The real {@link WiggleApi}: one channel, every call with the token and a deadline. */
export class GrpcApi implements WiggleApi {
  private readonly client: grpc.Client;
  private readonly token: string | undefined;

  constructor(conn: ConnectionOptions) {
    const address = conn.address ?? DEFAULT_ADDRESS;
    this.token = tokenOf(conn);
    let creds = grpc.credentials.createInsecure();
    const options: grpc.ChannelOptions = { ...CHANNEL_OPTIONS };
    if (conn.tls !== undefined && conn.tls !== false) {
      const t: TlsOptions = conn.tls === true ? {} : conn.tls;
      if ((t.cert === undefined) !== (t.key === undefined)) {
        throw new Error("mutual TLS needs both a client certificate and its key (WIGGLE_TLS_CERT and WIGGLE_TLS_KEY), or neither");
      }
      creds = grpc.credentials.createSsl(pem(t.ca, "CA"), pem(t.key, "key"), pem(t.cert, "certificate"));
      if (t.serverName !== undefined) {
        options["grpc.ssl_target_name_override"] = t.serverName;
        options["grpc.default_authority"] = t.serverName;
      }
    }
    const Service = wiggleService();
    this.client = new Service(address, creds, options);
  }

  private call<Req, Resp>(name: string, req: Req, opts: CallOptions): Promise<Resp> {
    const md = new grpc.Metadata();
    if (this.token !== undefined) {
      md.set("authorization", `Bearer ${this.token}`);
    }
    const method = (this.client as unknown as Record<string, UnaryMethod>)[name] as UnaryMethod;
    return new Promise<Resp>((resolve, reject) => {
      if (opts.signal?.aborted === true) {
        reject(new RpcError(Code.CANCELLED, "cancelled before it was sent"));
        return;
      }
      const call = method.call(
        this.client,
        req,
        md,
        { deadline: Date.now() + opts.timeoutMs },
        (err: grpc.ServiceError | null, value?: unknown) => {
          opts.signal?.removeEventListener("abort", onAbort);
          if (err !== null) {
            reject(RpcError.of(err));
          } else {
            resolve(value as Resp);
          }
        },
      );
      const onAbort = (): void => call.cancel();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  pollTasks(req: PollTasksRequest, opts: CallOptions): Promise<PollTasksResponse__Output> {
    return this.call("PollTasks", req, opts);
  }
  endPolls(req: EndPollsRequest, opts: CallOptions): Promise<EndPollsResponse__Output> {
    return this.call("EndPolls", req, opts);
  }
  getDefinition(req: GetDefinitionRequest, opts: CallOptions): Promise<Definition__Output> {
    return this.call("GetDefinition", req, opts);
  }
  heartbeat(req: HeartbeatRequest, opts: CallOptions): Promise<HeartbeatResponse__Output> {
    return this.call("Heartbeat", req, opts);
  }
  completeTask(req: CompleteTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output> {
    return this.call("CompleteTask", req, opts);
  }
  failTask(req: FailTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output> {
    return this.call("FailTask", req, opts);
  }
  releaseTask(req: ReleaseTaskRequest, opts: CallOptions): Promise<TaskReportResponse__Output> {
    return this.call("ReleaseTask", req, opts);
  }
  advanceRun(req: AdvanceRunRequest, opts: CallOptions): Promise<AdvanceRunResponse__Output> {
    return this.call("AdvanceRun", req, opts);
  }
  reportBatch(req: ReportBatchRequest, opts: CallOptions): Promise<ReportBatchResponse__Output> {
    return this.call("ReportBatch", req, opts);
  }
  startInstance(req: StartInstanceRequest, opts: CallOptions): Promise<StartInstanceResponse__Output> {
    return this.call("StartInstance", req, opts);
  }
  close(): void {
    this.client.close();
  }
}

/** Capped exponential back-off with jitter: 100 ms, 200 ms, ... up to 5 s, each x 0.8-1.2. */
export class Backoff {
  private current = 0;

  next(): number {
    if (this.current === 0) {
      this.current = 100;
    }
    const d = this.current;
    this.current = Math.min(5_000, this.current * 2);
    return d * (0.8 + 0.4 * Math.random());
  }

  reset(): void {
    this.current = 0;
  }
}

/** Resolves after `ms`, or at once (false) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve(false);
      return;
    }
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(ok);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(true), Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Logs once when the server becomes unreachable and once when it is back. */
export class Outage {
  private downSince = 0;
  constructor(private readonly log: Logger) {}

  failed(e: RpcError): void {
    if (this.downSince === 0) {
      this.downSince = Date.now();
      this.log.warn("wiggle server unreachable; retrying with backoff", { err: e.message });
    }
  }

  succeeded(): void {
    if (this.downSince !== 0) {
      this.log.warn("wiggle server reachable again", { after_ms: Date.now() - this.downSince });
      this.downSince = 0;
    }
  }
}
