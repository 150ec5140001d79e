/**
 * The pinned graphs local runs need, fetched once per version: versions are immutable, and
 * concurrent tasks of a new version wait for the one fetch. A worker that cannot get (or read)
 * the pinned version runs the task as a SERVER step: slower, never wrong.
 */
import { parseGraph, type Graph } from "./graph.js";
import type { Logger } from "./log.js";
import { Backoff, RpcError, retryable, sleep, type WiggleApi } from "./rpc.js";

/** How long a failed fetch is remembered before the worker asks again. */
const NEGATIVE_TTL_MS = 10_000;
/** How long a fetch retries while the server is unreachable. */
const RETRY_FOR_MS = 5_000;

export class Definitions {
  private readonly graphs = new Map<string, Promise<Graph | null>>();
  private readonly failedAt = new Map<string, number>();

  constructor(
    private readonly api: WiggleApi,
    private readonly log: Logger,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal,
  ) {}

  /** The graph of `flow` at `version`, or null when it cannot be had right now. */
  get(flow: string, version: string): Promise<Graph | null> {
    const failed = this.failedAt.get(version);
    if (failed !== undefined && Date.now() - failed < NEGATIVE_TTL_MS) {
      return Promise.resolve(null);
    }
    let g = this.graphs.get(version);
    if (g === undefined) {
      g = this.fetch(flow, version).then((graph) => {
        if (graph === null) {
          this.graphs.delete(version);
          this.failedAt.set(version, Date.now());
        } else {
          this.failedAt.delete(version);
        }
        return graph;
      });
      this.graphs.set(version, g);
    }
    return g;
  }

  private async fetch(flow: string, version: string): Promise<Graph | null> {
    const giveUp = Date.now() + RETRY_FOR_MS;
    const backoff = new Backoff();
    for (;;) {
      try {
        const def = await this.api.getDefinition(
          { name: flow, version },
          { timeoutMs: this.timeoutMs, signal: this.signal },
        );
        const graph = parseGraph(def.graph);
        if (graph.version !== version) {
          // The server handed over other bytes than the pinned version: never chain on them.
          this.log.warn("definition hashes to another version; running its tasks in SERVER mode", {
            flow,
            version,
            hash: graph.version,
          });
          return null;
        }
        return graph;
      } catch (e) {
        const err = e instanceof RpcError ? e : null;
        if (err !== null && retryable(err) && !this.signal.aborted) {
          const d = backoff.next();
          if (Date.now() + d < giveUp && (await sleep(d, this.signal))) {
            continue;
          }
        }
        this.log.warn("cannot fetch or read definition; running its tasks in SERVER mode", {
          flow,
          version,
          err: (e as Error).message,
        });
        return null;
      }
    }
  }
}
