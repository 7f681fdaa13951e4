// What is said about a resource besides its status: an Event record, and the seam that records it
// (Kubernetes Events in a cluster, kube/events.ts; log lines in local mode, controller/events.ts).
// Recording never fails the work that raised it.
import type { Resource } from './types.js';

export interface EventRecord {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface EventRecorder {
  record(obj: Resource, event: EventRecord): void;
}
