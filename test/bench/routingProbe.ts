// How fast a change reaches the cluster gateway's routing table, measured through the gateway
// itself (part of `npm run bench:controller`): new Endpoints and traffic changes of existing ones,
// started at a steady pace, each timed from the apiserver's answer to its write (it has accepted the
// change) to the first predict call through the gateway that the gateway answers per the change (200
// with the deployedModelId the change sends the traffic to). The calls reach one bundled model
// process: the probed models' pod IPs map to it through the gateway's UPSTREAM_RESOLVE. A time
// includes the watch's delivery to the gateway, its caches, the routing table rebuilt on the next
// lookup, up to one poll interval and that call's own round trip.
import { GROUP, VERSION } from '../../src/api/types.js';
import type { Clients } from '../helpers/cluster.js';

export interface ProbeOptions {
  c: Clients;
  namespace: string;
  gatewayPort: number;
  /** Names of models whose pods answer (their pod IPs resolve to the bundled model). */
  models: string[];
  /** How many changes: half new Endpoints, half traffic changes of the models' own Endpoints. */
  changes: number;
  /** A new change starts every paceMs. */
  paceMs: number;
  pollMs: number;
  timeoutMs: number;
}

export interface ProbeResult {
  created: number[];
  changed: number[];
  /** Changes not routed within timeoutMs. */
  missed: number;
}

/** The deployedModelId the gateway answers a predict to Endpoint `name` with, or the HTTP status when it is not a 200. */
export async function answeredBy(port: number, namespace: string, name: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/projects/${namespace}/locations/x/endpoints/${name}:predict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"instances":[1.0]}',
  });
  const text = await res.text();
  if (res.status !== 200) return `HTTP ${res.status}`;
  return (JSON.parse(text) as { deployedModelId?: string }).deployedModelId ?? 'no deployedModelId';
}

export async function probeRouting(o: ProbeOptions): Promise<ProbeResult> {
  const { c, namespace } = o;
  const result: ProbeResult = { created: [], changed: [], missed: 0 };
  const timed = async (write: () => Promise<unknown>, endpoint: string, expect: string, into: number[]): Promise<void> => {
    await write();
    const accepted = Date.now();
    for (;;) {
      const by = await answeredBy(o.gatewayPort, namespace, endpoint).catch((err: Error) => err.message);
      if (by === expect) {
        into.push(Date.now() - accepted);
        return;
      }
      if (Date.now() - accepted > o.timeoutMs) {
        result.missed++;
        process.stderr.write(`not routed within ${o.timeoutMs} ms: ${endpoint} (expected ${expect}, last ${by})\n`);
        return;
      }
      await new Promise((r) => setTimeout(r, o.pollMs));
    }
  };
  const running: Promise<void>[] = [];
  for (let i = 0; i < o.changes; i++) {
    // Model k >= 1; a traffic change sends its Endpoint's traffic to model k-1, whose own Endpoint
    // (named before k's) stays the first to name it: its AIP_ENDPOINT_ID, so its Deployment, is unchanged.
    const k = 1 + (Math.floor(i / 2) % (o.models.length - 1));
    const model = o.models[k];
    const other = o.models[k - 1];
    running.push(i % 2 === 0
      ? timed(() => c.custom.createNamespacedCustomObject({
          group: GROUP, version: VERSION, namespace, plural: 'endpoints',
          body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Endpoint', metadata: { name: `probe-${i}` }, spec: { destinations: [{ serviceRef: { name: model } }] } },
        }), `probe-${i}`, model, result.created)
      // The model's own Endpoint sends all its traffic to the model before it instead.
      : timed(() => c.custom.patchNamespacedCustomObject({
          group: GROUP, version: VERSION, namespace, plural: 'endpoints', name: model,
          body: [{ op: 'replace', path: '/spec/destinations', value: [{ serviceRef: { name: model }, trafficPercentage: 0 }, { serviceRef: { name: other }, trafficPercentage: 100 }] }],
        }), model, other, result.changed));
    await new Promise((r) => setTimeout(r, o.paceMs));
  }
  await Promise.all(running);
  return result;
}
