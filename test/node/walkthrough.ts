// The README's walkthrough on a real node, step by step: the node suite runs exactly these commands
// (from the repository root, with the node cluster's KUBECONFIG), and a documents test holds the
// README's copy equal to them.
import { NODE_NET } from '../cluster/nodeConfig.js';

/** The gateway's fixed node port in the walkthrough. */
export const WALKTHROUGH_NODE_PORT = 30080;

export const WALKTHROUGH: { command: string; output?: string }[] = [
  { command: 'npm run cluster:up -- --node' },
  { command: 'export KUBECONFIG="$PWD/.cluster/node/control-plane/kubeconfig"' },
  { command: `helm install predictgate charts/predictgate -n predictgate-system --create-namespace --set gateway.service.type=NodePort --set gateway.service.nodePort=${WALKTHROUGH_NODE_PORT} --wait` },
  { command: 'kubectl apply -f crds/samples/half-plus-two.yaml' },
  { command: 'kubectl wait --for=condition=EndpointReady endpoints.prediction.predictgate.dev/half-plus-two --timeout=5m' },
  {
    command: `curl -s -X POST http://${NODE_NET.nodeIp}:${WALKTHROUGH_NODE_PORT}/v1/projects/default/locations/us-central1/endpoints/half-plus-two:predict -H 'Content-Type: application/json' -d '{"instances": [1.0, 2.0, 5.0]}'`,
    output: '{"predictions":[2.5,3,4.5],"deployedModelId":"half-plus-two","modelDisplayName":"half-plus-two","modelVersionId":"1"}',
  },
  { command: 'kubectl get pods -A' },
  { command: 'helm uninstall predictgate -n predictgate-system' },
  { command: 'npm run cluster:down' },
];

/** The steps the suite runs itself: the cluster comes from the node tier's global setup, not cluster:up. */
export const SUITE_STEPS = WALKTHROUGH.filter((s) => !/cluster:(up|down)|^export /.test(s.command));
