// The JSON logger (pino) and the small Logger interface the rest of the code depends on.
import { pino } from 'pino';

export interface Logger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** A JSON-lines logger on stdout (or the given destination fd). */
export function createLogger(level: LogLevel, name = 'predictgate', fd = 1): Logger {
  return pino({ name, level, base: { name }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ fd, sync: false }));
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
