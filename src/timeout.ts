// A deadline on a promise, for the Kubernetes calls that carry none of their own (the leader's Lease
// calls, the apiserver probe at start).

/** `p`, or a rejection "no answer within N s" once `ms` have passed (the timer is cleared either way). */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
