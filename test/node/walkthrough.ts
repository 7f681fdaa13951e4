// The README's walkthrough on a real node, step by step: the node suite runs exactly these commands
// (from the repository root, with the node cluster's KUBECONFIG), and a documents test holds the
// README's copy equal to them.
import { NODE_NET } from '../cluster/nodeConfig.js';

export const UNINSTALL = 'helm uninstall predictgate -n predictgate-system';

/** The gateway's fixed node port in the walkthrough. */
export const WALKTHROUGH_NODE_PORT = 30080;

/** The ServiceAccount (in default) the walkthrough calls as, bound to predictgate-predictor. */
export const WALKTHROUGH_CALLER = 'caller';

export interface Step {
  command: string;
  /** What the command prints, when the README shows it. */
  output?: string;
  /** Who runs it instead of the walkthrough test, when someone else does. */
  runBy?: string;
}

export const WALKTHROUGH: Step[] = [
  { command: 'npm run cluster:up -- --node', runBy: 'the node tier\'s global setup (node.ts, as cluster:up)' },
  { command: 'export KUBECONFIG="$PWD/.cluster/node/control-plane/kubeconfig"', runBy: 'the node tier\'s global setup' },
  { command: `helm install predictgate charts/predictgate -n predictgate-system --create-namespace --set gateway.service.type=NodePort --set gateway.service.nodePort=${WALKTHROUGH_NODE_PORT} --wait` },
  // The gateway checks its callers: a ServiceAccount allowed to call in default, whose token the curl sends.
  { command: `kubectl create serviceaccount ${WALKTHROUGH_CALLER}` },
  { command: `kubectl create rolebinding ${WALKTHROUGH_CALLER}-predicts --clusterrole=predictgate-predictor --serviceaccount=default:${WALKTHROUGH_CALLER}` },
  { command: 'kubectl apply -f crds/samples/half-plus-two.yaml' },
  { command: 'kubectl wait --for=condition=EndpointReady endpoints.prediction.predictgate.dev/half-plus-two --timeout=5m' },
  {
    command: `curl -s -X POST http://${NODE_NET.nodeIp}:${WALKTHROUGH_NODE_PORT}/v1/projects/default/locations/us-central1/endpoints/half-plus-two:predict -H "Authorization: Bearer $(kubectl create token ${WALKTHROUGH_CALLER})" -H 'Content-Type: application/json' -d '{"instances": [1.0, 2.0, 5.0]}'`,
    output: '{"predictions":[2.5,3,4.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}',
  },
  { command: 'kubectl get pods -A', runBy: 'the logs test (as -o json)' },
  { command: UNINSTALL, runBy: 'the last test' },
  { command: 'npm run cluster:down', runBy: 'the node tier\'s global teardown (node.ts, as cluster:down)' },
];

/** The steps the walkthrough test runs verbatim, in order. */
export const SUITE_STEPS = WALKTHROUGH.filter((s) => s.runBy === undefined);
