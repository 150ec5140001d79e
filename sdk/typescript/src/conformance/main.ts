/**
 * The conformance worker: the activities of spec/conformance/ACTIVITIES.md served by this SDK,
 * so `wiggle conformance --worker CMD` can run the corpus against it.
 *
 * Environment: `WIGGLE_ADDRESS` (host:port, required here) and the other connection variables
 * ({@link connectionFromEnv}), `WIGGLE_QUEUES` (comma-separated, default
 * `default,other`), `WIGGLE_CONCURRENCY` (default 64), `WIGGLE_CONFORMANCE_BATCH_SIZE` (the
 * LOCAL_ASYNC batch size, default 64), `WIGGLE_CONFORMANCE_TRACE` (the trace file), and
 * `WIGGLE_LOG_LEVEL` (default `warn`). SIGTERM or SIGINT drains and exits 0; a second signal
 * stops at once, like a crash for whatever is still held.
 */
import { LEVELS, stderrLogger, type LogLevel } from "../log.js";
import { connectionFromEnv } from "../rpc.js";
import { Worker } from "../worker.js";
import { traced } from "./activities.js";

function positive(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === "") {
    return fallback;
  }
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) {
    throw new Error(`${name}=${JSON.stringify(v)} is not a positive integer`);
  }
  return n;
}

/** Serves until SIGTERM; the process's exit status. */
export async function main(): Promise<number> {
  try {
    if ((process.env["WIGGLE_ADDRESS"] ?? "") === "") {
      throw new Error("set WIGGLE_ADDRESS to the server's host:port");
    }
    const queues = (process.env["WIGGLE_QUEUES"] ?? "default,other").split(",").filter((q) => q !== "");
    const level = process.env["WIGGLE_LOG_LEVEL"] ?? "warn";
    if (!LEVELS.includes(level as LogLevel)) {
      throw new Error(`WIGGLE_LOG_LEVEL=${JSON.stringify(level)} is not one of ${LEVELS.join(", ")}`);
    }
    const worker = new Worker({
      connection: connectionFromEnv(),
      queues,
      concurrency: positive("WIGGLE_CONCURRENCY", 64),
      localBatchSize: positive("WIGGLE_CONFORMANCE_BATCH_SIZE", 64),
      logger: stderrLogger(level as LogLevel),
      ...traced(),
    });
    await worker.run();
    return 0;
  } catch (e) {
    process.stderr.write(`wiggle-conformance-worker: ${(e as Error).message}\n`);
    return 1;
  }
}
