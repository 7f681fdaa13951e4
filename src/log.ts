// The JSON logger (pino) and the small Logger interface the rest of the code depends on.
import { pino } from 'pino';

export interface Logger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  /** Whether lines of this level are written (so a caller can skip building one that would be dropped). */
  isLevelEnabled(level: LogLevel): boolean;
  child(bindings: Record<string, unknown>): Logger;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const destinations: { flushSync(): void }[] = [];

/** A JSON-lines logger on stdout (or the given fd), written asynchronously; see flushLogs. */
export function createLogger(level: LogLevel, name = 'predictgate', fd = 1): Logger {
  const dest = pino.destination({ fd, sync: false });
  destinations.push(dest);
  return pino({ name, level, base: { name }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** Writes out buffered log lines; call before process.exit so the last lines are not lost. */
export function flushLogs(): void {
  for (const d of destinations) {
    try {
      d.flushSync();
    } catch {
      // nothing buffered, or the fd is gone: nothing more can be done
    }
  }
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
