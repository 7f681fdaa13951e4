// Which Endpoints name which DeployedModels, kept up to date from the store's change events by the
// manager: a model's change finds the Endpoints to re-reconcile, and a model its AIP_ENDPOINT_ID,
// without reading every Endpoint (at thousands of Endpoints, such a scan on every model event and
// every model reconcile costs more than the reconciles themselves).
import { splitKey } from '../api/types.js';

export class EndpointIndex {
  /** Endpoint key → the model keys it names. */
  private readonly modelsOf = new Map<string, readonly string[]>();
  /** Model key → the keys of the Endpoints that name it. */
  private readonly endpointsOf = new Map<string, Set<string>>();

  /** Records that Endpoint `endpointKey` names `modelKeys` (replacing what it named before); returns what it named before. */
  set(endpointKey: string, modelKeys: readonly string[]): readonly string[] {
    const before = this.delete(endpointKey);
    this.modelsOf.set(endpointKey, modelKeys);
    for (const m of modelKeys) {
      let eps = this.endpointsOf.get(m);
      if (!eps) this.endpointsOf.set(m, (eps = new Set()));
      eps.add(endpointKey);
    }
    return before;
  }

  /** Forgets Endpoint `endpointKey`; returns the model keys it named. */
  delete(endpointKey: string): readonly string[] {
    const before = this.modelsOf.get(endpointKey) ?? [];
    this.modelsOf.delete(endpointKey);
    for (const m of before) {
      const eps = this.endpointsOf.get(m);
      eps?.delete(endpointKey);
      if (eps?.size === 0) this.endpointsOf.delete(m);
    }
    return before;
  }

  /** The keys of the Endpoints that name model `modelKey`. */
  endpointsNaming(modelKey: string): ReadonlySet<string> {
    return this.endpointsOf.get(modelKey) ?? EMPTY;
  }

  /** The first name, in sort order, of the Endpoints that name `modelKey` (of any namespace), or undefined. */
  firstEndpointName(modelKey: string): string | undefined {
    let first: string | undefined;
    for (const key of this.endpointsNaming(modelKey)) {
      const { name } = splitKey(key);
      if (first === undefined || name < first) first = name;
    }
    return first;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
