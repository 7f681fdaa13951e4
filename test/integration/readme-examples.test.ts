// The README's examples, run. Every `$ curl ...` command of a ```console block is executed by bash
// with the real curl (and jq where the README pipes into it) against local mode serving the samples
// (crds/samples, what `npm start` serves), the README's port replaced by the test's, and what it
// prints is compared with what the README shows, after the narrow rules below for what must vary.
// The autoscaler's clock is the test's: before the first example of the scale-to-zero sample it
// moves past the stable window, and the sample is at zero as the README shows it.
// Every ```sh block is a non-curl snippet; SHELL_BLOCKS says which test runs its commands, and a
// block that is neither fails here.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, ready, scaledToZeroByClock, startLocal, testClock, type LocalHarness } from '../helpers/local.js';
import { consoleExamples, fencedBlocks, type ConsoleExample } from '../helpers/markdown.js';
import { freePort } from '../../src/workload/ports.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const BLOCKS = fencedBlocks(README);

/**
 * The non-curl shell blocks, by their first line, and the tests that run their commands. Those run
 * them on the test control plane, each in a namespace of its own and, where a cluster would have a
 * kubelet, playing kube-controller-manager (marking Deployments available). `kubectl port-forward`
 * is the one command no test runs: with no kubelet there is no pod to forward to, so the tests call
 * the gateway's port directly.
 */
const NODE_EXAMPLE = 'node --input-type=module -e "';
/** What tells the Node snippets apart: the openai client's and the Vertex client's over gRPC. */
const OPENAI_EXAMPLE = "import OpenAI from 'openai';";
const GRPC_EXAMPLE = "import * as grpc from '@grpc/grpc-js';";

const SHELL_BLOCKS: Record<string, string[]> = {
  // `npm ci && npm test` is what .ci/run runs. `npm start` is `predictgate local crds/samples --grpc-port 8081`: this
  // test serves crds/samples in local mode, command.test.ts runs `predictgate local DIR` as a process.
  'npm ci && npm start     # local mode: the samples in crds/samples on http://127.0.0.1:8080 (gRPC on 8081)': ['.ci/run', 'test/integration/readme-examples.test.ts', 'test/unit/command.test.ts'],
  // helm install of charts/predictgate (its CRDs with it), the half-plus-two sample applied, kubectl
  // wait for EndpointReady, a predict through the gateway, helm uninstall.
  'helm install predictgate charts/predictgate -n predictgate-system --create-namespace \\': ['test/integration/cluster-chart.test.ts'],
  // kubectl apply --server-side of the CRDs (test/helpers/cluster.ts applyCrds; the chart's copies
  // are checked identical to crds/ by cluster-chart.test.ts), helm upgrade of a release.
  // cluster:up with a real node, helm install from the image built offline, a sample, a predict
  // through the NodePort, helm uninstall, cluster:down: the node suite runs these very lines.
  'npm run cluster:up -- --node': ['test/node/walkthrough.ts', 'test/node/chart.test.ts', 'test/unit/documents.test.ts'],
  'kubectl apply --server-side -f charts/predictgate/crds/': ['test/helpers/cluster.ts', 'test/integration/cluster-chart.test.ts'],
  // A team's ServiceAccount and RoleBinding to predictgate-predictor, kubectl auth can-i, and a
  // predict with its token: run as it is shown (its curl too) against the chart's gateway with
  // PREDICT_AUTH=kubernetes, in the callers' test of cluster-chart.test.ts.
  'kubectl create serviceaccount scorer -n team-a': ['test/integration/cluster-chart.test.ts'],
  // The CRDs applied, `predictgate controller` and `predictgate gateway` as processes with a
  // kubeconfig, the samples applied, kubectl wait for Ready and EndpointReady.
  // The Role of "Who may call", applied in a namespace of its own and used by its callers.
  "kubectl apply -f - <<'EOF'": ['test/integration/cluster-auth.test.ts'],
  'kubectl apply -f crds/                                   # DeployedModel and Endpoint': ['test/integration/cluster-controller.test.ts', 'test/integration/cluster-gateway.test.ts'],
  // The openai client streaming a chat completion from the tiny-llm sample, and the Vertex client's
  // predict over gRPC: run below, against the samples, each one's output compared with its block's last line.
  [NODE_EXAMPLE]: ['test/integration/readme-examples.test.ts'],
};

/** The README's port, replaced in commands by the one the test's local mode listens on. */
const README_PORT = /\b(localhost|127\.0\.0\.1|[a-z0-9-]+(?:\.[a-z0-9-]+)*\.predictgate\.internal):8080\b/g;

/** The README's gRPC port (`npm start`'s), in the Vertex client's options. */
const README_GRPC_PORT = /\bport: 8081\b/g;

/** What may differ between the README and a run, each rule applied to both sides. */
const VARYING: [RegExp, string][] = [
  // curl -i prints header lines as they came, ending in CRLF.
  [/\r\n/g, '\n'],
  // The HTTP Date header.
  [/^Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/gm, 'Date: <date>'],
  // RFC 3339 times in the status and the Vertex Endpoint resource (creation, transitions).
  [/"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"/g, '"<time>"'],
  // Request ids the gateway makes (random UUIDs) when the call brings none.
  [/^X-Request-Id: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/gm, 'X-Request-Id: <uuid>'],
  // The times and the per-process ids of an OpenAI-compatible answer.
  [/"created":\d+/g, '"created":<time>'],
  [/"id":"(chatcmpl|cmpl)-\d+"/g, '"id":"$1-<n>"'],
];

function normalise(text: string): string {
  return VARYING.reduce((t, [rule, to]) => t.replace(rule, to), text).replace(/\n+$/, '');
}

function run(command: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', `set -eo pipefail\n${command}`], { cwd: ROOT, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

const consoleBlocks = BLOCKS.filter((b) => b.lang === 'console');
const examples: ConsoleExample[] = consoleBlocks.flatMap(consoleExamples);

test('every shell example is a curl example run here or a snippet another test runs', () => {
  const kinds = BLOCKS.map((b) => b.lang);
  expect(kinds.filter((k) => k !== 'console' && k !== 'sh' && k !== '')).toEqual([]);
  // Blocks without a language are not shell (the layout tree); they hold no commands.
  for (const b of BLOCKS.filter((x) => x.lang === '')) expect({ line: b.line, curl: /^\s*\$?\s*curl\b/m.test(b.text) }).toEqual({ line: b.line, curl: false });
  for (const e of examples) expect({ line: e.line, command: e.command.split(' ')[0] }).toEqual({ line: e.line, command: 'curl' });
  const shell = BLOCKS.filter((b) => b.lang === 'sh');
  const first = shell.map((b) => b.text.split('\n')[0]);
  expect(first.filter((f) => !(f in SHELL_BLOCKS))).toEqual([]);
  expect(Object.keys(SHELL_BLOCKS).filter((f) => !first.includes(f))).toEqual([]);
  // The node walkthrough's curl runs against the real node, in the node suite; the team
  // RoleBinding's against the chart's gateway, in the chart suite.
  const curlRunElsewhere = ['npm run cluster:up -- --node', 'kubectl create serviceaccount scorer -n team-a'];
  for (const b of shell) expect({ line: b.line, curl: /\bcurl\b/.test(b.text) && !curlRunElsewhere.some((f) => b.text.startsWith(f)) }).toEqual({ line: b.line, curl: false });
  for (const files of Object.values(SHELL_BLOCKS)) for (const f of files) expect({ f, exists: existsSync(join(ROOT, f)) }).toEqual({ f, exists: true });
});

describe('the curl examples against local mode', () => {
  let h: LocalHarness;
  const clock = testClock();
  let scaledToZero = false;

  /** The scale-to-zero sample at zero, as a minute without a call leaves it: the clock moved past the stable window. */
  const sampleAtZero = (): Promise<void> => scaledToZeroByClock(h, clock, 'default/scale-to-zero', 'the scale-to-zero sample at zero');

  beforeAll(async () => {
    for (const tool of ['curl', 'jq']) {
      const r = await run(`command -v ${tool}`);
      if (r.code !== 0) throw new Error(`${tool} is needed to run the README's examples (apt-get install -y ${tool})`);
    }
    const dir = join(ROOT, 'crds/samples');
    const files = Object.fromEntries(readdirSync(dir).filter((f) => f.endsWith('.yaml')).map((f) => [f, readFileSync(join(dir, f), 'utf8')]));
    h = await startLocal(files, { now: clock.now, settings: { grpcPort: await freePort() } });
    await h.until((x) => x.mode.store.loaded && x.mode.store.listEndpoints().length > 0 && x.mode.store.listEndpoints().every((ep) => ready(x, 'Endpoint', `default/${ep.metadata.name}`)), 'every sample Endpoint Ready');
  });

  afterAll(async () => {
    await h?.stop();
  });

  test('there are examples to run', () => {
    expect(consoleBlocks.length).toBeGreaterThan(0);
    expect(examples.length).toBeGreaterThanOrEqual(consoleBlocks.length);
  });

  test('the Node snippets are the openai client\'s and the Vertex client\'s over gRPC', () => {
    const snippets = BLOCKS.filter((b) => b.lang === 'sh' && b.text.startsWith(NODE_EXAMPLE));
    expect(snippets.map((b) => [OPENAI_EXAMPLE, GRPC_EXAMPLE].filter((m) => b.text.includes(m)))).toEqual([[OPENAI_EXAMPLE], [GRPC_EXAMPLE]]);
  });

  test.each([['the openai client', OPENAI_EXAMPLE], ['the Vertex client over gRPC', GRPC_EXAMPLE]])('%s example prints what the README says', async (_what, marker) => {
    const block = BLOCKS.find((b) => b.lang === 'sh' && b.text.startsWith(NODE_EXAMPLE) && b.text.includes(marker));
    const lines = (block?.text ?? '').trimEnd().split('\n');
    const expected = lines.pop()?.replace(/^# /, '');
    const command = lines.join('\n').replace(README_PORT, `$1:${h.mode.port}`).replace(README_GRPC_PORT, `port: ${h.mode.grpcPort}`);
    const r = await run(command);
    // console.log ends its line; the openai example writes the tokens without one.
    expect({ code: r.code, stderr: r.stderr, stdout: r.stdout.replace(/\n$/, '') }).toEqual({ code: 0, stderr: '', stdout: expected });
  });

  test.each(examples.map((e) => [e.line, e.command.split('\n')[0].slice(0, 100), e] as const))('README line %i: %s', async (_line, _what, e) => {
    if (!scaledToZero && /\bscale-to-zero\b/.test(e.command)) {
      await sampleAtZero();
      scaledToZero = true;
    }
    const r = await run(e.command.replace(README_PORT, `$1:${h.mode.port}`));
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(normalise(r.stdout)).toBe(normalise(e.output));
  });
});
