// Valid bodies for each kind of route, drawn at random: the structure every hostile family starts
// from before it mutates one part (TF row and columnar forms for half-plus-two, TorchServe `data`
// instances with `{"b64"}` values for echo, gs-realtime-v0.1 graphs, tf.Example lists for classify
// and regress, google.api.HttpBody for rawPredict's `$alt=json` form, explain's extra members).
import { Obj, tree, type Node } from './tree.js';
import type { Rand } from './rand.js';
import type { BodyKind, Target } from './targets.js';

/** Short valid base64 texts (with and without padding, standard and URL-safe). */
export const B64 = ['aGVsbG8=', 'aGVsbG8', 'AAECAwQF', 'AA==', '', '-_-_', 'cHJlZGljdGdhdGU='];

const num = (r: Rand): number => (r.chance(0.5) ? r.between(-100, 100) : Math.round((r.float() * 200 - 100) * 1e4) / 1e4);

/** half-plus-two (input `x`, float): row or columnar, scalars or lists, optionally named. */
function tfPredict(r: Rand): Node {
  const n = r.between(1, 6);
  const width = r.between(1, 4);
  const value = (): unknown => (r.chance(0.5) ? num(r) : Array.from({ length: width }, () => num(r)));
  const shape = r.int(4);
  const body: Record<string, unknown> = {};
  if (shape === 0) body.instances = Array.from({ length: n }, () => num(r));
  else if (shape === 1) {
    const v = r.chance(0.5);
    body.instances = Array.from({ length: n }, () => ({ x: v ? Array.from({ length: width }, () => num(r)) : num(r) }));
  } else if (shape === 2) body.inputs = r.chance(0.5) ? Array.from({ length: n }, () => num(r)) : { x: Array.from({ length: n }, () => num(r)) };
  else body.instances = Array.from({ length: n }, () => Array.from({ length: width }, () => num(r)));
  if (r.chance(0.2)) body.signature_name = 'serving_default';
  if (r.chance(0.15)) body.parameters = { temperature: num(r) };
  if (body.instances !== undefined && r.chance(0.1)) body.instances = [{ x: value(), image_bytes: { b64: r.pick(B64) } }];
  return tree(body);
}

/** echo (TorchServe handler): `{"data": ...}` instances or bare values the gateway wraps, b64 values. */
function ptPredict(r: Rand): Node {
  const n = r.between(1, 5);
  const value = (): unknown => r.pick([() => num(r), () => r.word(), () => [num(r), num(r)], () => ({ b64: r.pick(B64) }), () => ({ a: num(r), b: [r.word()] }), () => true])();
  const instances = Array.from({ length: n }, () => (r.chance(0.6) ? { data: value() } : value()));
  const body: Record<string, unknown> = { instances };
  if (r.chance(0.2)) body.parameters = r.chance(0.5) ? { top_k: r.between(1, 5) } : null;
  if (r.chance(0.05)) body.labels = { team: r.word() };
  return tree(body);
}

/** A gs-realtime-v0.1 payload for node_classification: a few authors and papers, edges between them, targets among them. */
function gsPredict(r: Rand): Node {
  const nodes: Record<string, unknown>[] = [];
  const authors = r.between(1, 3);
  const papers = r.between(0, 3);
  for (let i = 0; i < authors; i++) nodes.push({ node_type: 'author', node_id: `a${i}`, features: { feat: [num(r), num(r)] } });
  for (let i = 0; i < papers; i++) nodes.push({ node_type: 'paper', node_id: `p${i}`, features: { title: r.word(3, 12), year: r.between(1990, 2026) } });
  const edges: Record<string, unknown>[] = [];
  for (let i = 0; i < papers; i++) edges.push({ edge_type: ['author', 'writes', 'paper'], src_node_id: `a${r.int(authors)}`, dest_node_id: `p${i}`, features: {} });
  const targets = [{ node_type: 'author', node_id: `a${r.int(authors)}` }];
  if (papers > 0 && r.chance(0.4)) targets.push({ node_type: 'paper', node_id: `p${r.int(papers)}` });
  return tree({ version: 'gs-realtime-v0.1', gml_task: 'node_classification', graph: { nodes, edges }, targets });
}

/** tf.Example lists for half-plus-two's classify and regress signatures (feature x: float[1], x2 optional). */
function tfExamples(r: Rand, verb: 'classify' | 'regress'): Node {
  const examples = Array.from({ length: r.between(1, 4) }, () => (r.chance(0.5) ? { x: num(r) } : { x: [num(r)], x2: num(r) }));
  const body: Record<string, unknown> = { signature_name: `tensorflow/serving/${verb}`, examples };
  if (r.chance(0.3)) body.context = { x2: num(r) };
  return tree(body);
}

/** rawPredict's `$alt=json` form: google.api.HttpBody around a TorchServe body. */
function httpBody(r: Rand): Node {
  const inner = JSON.stringify({ instances: [{ data: num(r) }] });
  return tree({ httpBody: { contentType: r.pick(['application/json', 'text/plain', '']), data: Buffer.from(inner).toString(r.chance(0.8) ? 'base64' : 'base64url') } });
}

const BUILDERS: Record<BodyKind, (r: Rand, t: Target) => Node> = {
  'tf-predict': tfPredict,
  'pt-predict': ptPredict,
  'custom-predict': (r) => (r.chance(0.5) ? tfPredict(r) : ptPredict(r)),
  'gs-predict': gsPredict,
  'tf-examples': (r, t) => tfExamples(r, t.examples ?? 'classify'),
  httpbody: httpBody,
};

/** A valid body for a target (explain bodies sometimes name their deployed model, and carry an override). */
export function validBody(r: Rand, t: Target): Node {
  const body = BUILDERS[t.body](r, t);
  if (t.explain && body instanceof Obj) {
    if (r.chance(0.4)) body.entries.push(['deployedModelId', t.model]);
    if (r.chance(0.15)) body.entries.push(['explanationSpecOverride', tree({ parameters: { sampledShapleyAttribution: { pathCount: 5 } } })]);
  }
  return body;
}
