// When each address of a set of EndpointSlices turned ready or not, from the slices' watch events:
// the rollout rows' and the autoscaling scenarios' view of when a pod takes calls. An address is
// ready when any slice lists it ready and not terminating: an address that a gone pod held and a new
// pod took can still be listed, not ready, in a slice that the EndpointSlice controller has not
// updated yet, and that stale entry must not hide the new pod's readiness.
import type { V1EndpointSlice } from '@kubernetes/client-node';

export interface ReadinessChange {
  at: number;
  address: string;
  ready: boolean;
}

export class SliceReadiness {
  private readonly slices = new Map<string, V1EndpointSlice>();
  private readonly state = new Map<string, boolean>();
  readonly changes: ReadinessChange[] = [];

  /** `now`: the clock of the changes (performance.now() unless told). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** One watch event of a slice (ADDED, MODIFIED, DELETED); a change of any address is kept. */
  apply(phase: string, slice: V1EndpointSlice): void {
    const name = slice.metadata?.name ?? '';
    if (phase === 'DELETED') this.slices.delete(name);
    else this.slices.set(name, slice);
    const listed = new Map<string, boolean>();
    for (const s of this.slices.values()) {
      for (const e of s.endpoints ?? []) {
        const ready = e.conditions?.ready === true && e.conditions?.terminating !== true;
        for (const a of e.addresses) listed.set(a, listed.get(a) === true || ready);
      }
    }
    const at = this.now();
    for (const a of new Set([...listed.keys(), ...this.state.keys()])) {
      const ready = listed.get(a) ?? false;
      if (this.state.get(a) === ready) continue;
      this.state.set(a, ready);
      this.changes.push({ at, address: a, ready });
    }
  }

  /** The first time at or after `since` the address turned `ready` (or not). */
  turned(address: string, ready: boolean, since: number): number | undefined {
    return this.changes.find((c) => c.address === address && c.ready === ready && c.at >= since)?.at;
  }
}
