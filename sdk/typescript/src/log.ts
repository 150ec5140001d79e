/** The worker's own events. Any object with these four methods will do (pino, winston, console). */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** The log levels, lowest first. */
export const LEVELS = ["debug", "info", "warn", "error"] as const;
/** A log level. */
export type LogLevel = (typeof LEVELS)[number];

/** A logger writing `wiggle-worker LEVEL message key=value ...` lines to stderr from `level` up. */
export function stderrLogger(level: LogLevel = "warn"): Logger {
  const from = LEVELS.indexOf(level);
  const at =
    (l: LogLevel) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (LEVELS.indexOf(l) < from) {
        return;
      }
      const extra = Object.entries(fields ?? {})
        .map(([k, v]) => ` ${k}=${typeof v === "string" ? JSON.stringify(v) : String(v)}`)
        .join("");
      process.stderr.write(`wiggle-worker ${l.toUpperCase()} ${message}${extra}\n`);
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
