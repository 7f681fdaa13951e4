// Explain's answer over gRPC (src/gateway/grpc/explanation.ts): Vertex's Explanation in its JSON
// form becomes the ExplainResponse message, which encodes and decodes with Vertex's field numbers;
// members the message has no field for are dropped; a value that does not fit is an error at its path.
import { explainAnswer } from '../../src/gateway/grpc/explanation.js';
import { ExplainResponse } from '../../src/gateway/grpc/proto.js';

const answer = (doc: unknown): Buffer => Buffer.from(JSON.stringify(doc));

test('every field of an explanation, through the wire form and back', () => {
  const msg = explainAnswer(answer({
    explanations: [{
      attributions: [{
        baselineOutputValue: 0.5, instanceOutputValue: 2.5, featureAttributions: { x: [0.1, 0.2], note: 'n' }, outputIndex: [0, 3],
        outputDisplayName: 'score', approximationError: 0.01, outputName: 'out', extra: 'dropped',
      }],
      neighbors: [{ neighborId: 'n1', neighborDistance: 0.3 }],
    }],
    deployedModelId: 'm1',
    predictions: [2.5],
    somethingElse: true,
  }));
  const back = ExplainResponse.decode(ExplainResponse.encode(msg));
  expect(back.deployed_model_id).toBe('m1');
  expect(back.predictions.map((p) => p.numberValue)).toEqual([2.5]);
  const [a] = back.explanations[0].attributions;
  expect({ ...a, feature_attributions: undefined }).toEqual({
    baseline_output_value: 0.5, instance_output_value: 2.5, feature_attributions: undefined, output_index: [0, 3], output_display_name: 'score', approximation_error: 0.01, output_name: 'out',
  });
  expect(a.feature_attributions?.structValue?.fields?.x?.listValue?.values?.map((v) => v.numberValue)).toEqual([0.1, 0.2]);
  expect(back.explanations[0].neighbors).toEqual([{ neighbor_id: 'n1', neighbor_distance: 0.3 }]);
});

test('an answer without explanations or with empty ones is an empty message, not an error', () => {
  expect(explainAnswer(answer({ deployedModelId: 'm' }))).toEqual({ explanations: [], deployed_model_id: 'm', predictions: [] });
  expect(explainAnswer(answer({ explanations: [{}] })).explanations).toEqual([{ attributions: [], neighbors: [] }]);
});

test.each([
  [{ explanations: { a: 1 } }, 'explanations: expected a list, got {"a":1}'],
  [{ explanations: [3] }, 'explanations[0]: expected an object (an Explanation), got 3'],
  [{ explanations: [{ attributions: [{ outputIndex: [0, 1.5] }] }] }, 'explanations[0].attributions[0].outputIndex[1]: expected a 32-bit integer, got 1.5'],
  [{ explanations: [{ attributions: [{ outputIndex: [2 ** 31] }] }] }, 'explanations[0].attributions[0].outputIndex[0]: expected a 32-bit integer, got 2147483648'],
  [{ explanations: [{ attributions: [{ baselineOutputValue: '1' }] }] }, 'explanations[0].attributions[0].baselineOutputValue: expected a number, got "1"'],
  [{ explanations: [{}, { neighbors: [{ neighborId: 7 }] }] }, 'explanations[1].neighbors[0].neighborId: expected a string, got 7'],
])('a value that does not fit its field is the model\'s error at its path: %j', (doc, message) => {
  expect(() => explainAnswer(answer(doc))).toThrow(expect.objectContaining({ code: 'bad_upstream_response', message: `the model's explain answer: ${message}` }));
});
