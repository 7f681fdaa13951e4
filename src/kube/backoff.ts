// The wait at start for a Kubernetes apiserver that answers: tries with backoff (src/backoff.ts, from
// BACKOFF_BASE_MS to BACKOFF_MAX_MS, which the watches use too), one plain log line per failed try
// with the address and the next delay. The sleeper is injected, so the tries can be tested without waiting.
import type { KubeConfig } from '@kubernetes/client-node';
import { VersionApi } from '@kubernetes/client-node';
import type { Logger } from '../log.js';
import { backoffMs } from '../backoff.js';
import { describeApiError, statusCodeOf } from './errors.js';
import { withTimeout } from '../timeout.js';

export const BACKOFF_BASE_MS = 500;
export const BACKOFF_MAX_MS = 30_000;

export type Sleep = (ms: number) => Promise<void>;

const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());

export interface ApiserverWait {
  /** The apiserver's address, for the log. */
  server: string;
  /** Resolves once the apiserver answered; rejects when it could not be reached. */
  probe(): Promise<unknown>;
  logger: Logger;
  sleep?: Sleep;
  baseMs?: number;
  maxMs?: number;
}

/** "1.5 s" or "500 ms". */
function delayText(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
}

/** A connection error's reason without the request URL around it (node-fetch's "request to ... failed, reason: ..."). */
function reasonOf(err: unknown): string {
  const text = describeApiError(err);
  return /, reason: (.*)$/s.exec(text)?.[1] ?? text;
}

/** Tries `probe` until it resolves, sleeping with backoff between tries. Resolves with the number of failed tries. */
export async function waitForApiserver(o: ApiserverWait): Promise<number> {
  const sleep = o.sleep ?? realSleep;
  for (let failures = 0; ; ) {
    try {
      await o.probe();
      if (failures > 0) o.logger.info({ server: o.server, failedTries: failures }, `Kubernetes API at ${o.server} reached`);
      return failures;
    } catch (err) {
      failures++;
      const delay = backoffMs(failures, o.baseMs ?? BACKOFF_BASE_MS, o.maxMs ?? BACKOFF_MAX_MS);
      const reason = reasonOf(err);
      o.logger.warn({ server: o.server, retryInMs: delay, err: reason }, `Kubernetes API at ${o.server} unreachable (${reason}); next try in ${delayText(delay)}`);
      await sleep(delay);
    }
  }
}

/**
 * The apiserver's `/version` (readable without any grant). Any HTTP answer counts as reached: a
 * refused credential is the caches' to report. No answer within `timeoutMs` counts as unreachable.
 */
export function versionProbe(kc: KubeConfig, timeoutMs = 10_000): () => Promise<void> {
  const api = kc.makeApiClient(VersionApi);
  return async () => {
    try {
      await withTimeout(api.getCode(), timeoutMs);
    } catch (err) {
      if (statusCodeOf(err) === undefined) throw err;
    }
  };
}

/** waitForApiserver on the cluster of `kc`, probed by its /version. */
export function waitForKube(kc: KubeConfig, logger: Logger): Promise<number> {
  return waitForApiserver({ server: kc.getCurrentCluster()?.server ?? '?', probe: versionProbe(kc), logger });
}
