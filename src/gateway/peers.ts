// This gateway's place among the gateway's replicas, from its own Service's EndpointSlices
// (GATEWAY_SERVICE): how many replicas take calls and where this one stands among them, so that
// each admits its share of a model's maxConcurrency and the fleet together admits what one gateway
// would. A replica not in the slices yet (starting) or any more (draining) counts itself after the others.
import { networkInterfaces } from 'node:os';
import { ALONE, type GatewayShare } from './admission.js';

/** This gateway's share among `replicas` (sorted base URLs of the Service's ready endpoints); `self` tells its own. */
export function placeAmong(replicas: readonly string[], self: (base: string) => boolean): GatewayShare {
  if (replicas.length === 0) return ALONE;
  const index = replicas.findIndex(self);
  return index < 0 ? { replicas: replicas.length + 1, index: replicas.length } : { replicas: replicas.length, index };
}

/** Whether a base URL is this process's: one of the machine's interface addresses, on the port it listens on (known once it does). */
export function ownAddress(port: () => number, interfaces = networkInterfaces()): (base: string) => boolean {
  const hosts = new Set<string>();
  for (const list of Object.values(interfaces)) for (const i of list ?? []) hosts.add(i.address);
  return (base) => {
    let url: URL;
    try {
      url = new URL(base);
    } catch {
      return false;
    }
    return Number(url.port) === port() && hosts.has(url.hostname.replace(/^\[|\]$/g, ''));
  };
}

/** Where a gateway's share comes from: the replicas of its Service, and word when they change. */
export interface PeerReplicas {
  replicas(): readonly string[];
  onChange(listener: () => void): void;
}

/** This gateway's share now, recomputed only when the Service's replicas change (calls read it often). */
export function followShare(peers: PeerReplicas, self: (base: string) => boolean, changed: () => void): () => GatewayShare {
  let share = placeAmong(peers.replicas(), self);
  peers.onChange(() => {
    share = placeAmong(peers.replicas(), self);
    changed();
  });
  return () => share;
}
