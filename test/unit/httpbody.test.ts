// google.api.HttpBody in proto3 JSON (the client libraries' REST form of rawPredict): parsing with
// field-precise errors and the size limit, the wrapped answer, and recognising `$alt=json`.
import { httpBodyAnswer, parseHttpBodyRequest } from '../../src/payload/httpBody.js';
import { wantsProtoJson } from '../../src/gateway/rawPredict.js';
import { ApiError } from '../../src/errors.js';
import { thrownBy } from '../helpers/expect.js';

const parse = (text: string, max = 1024): ReturnType<typeof parseHttpBodyRequest> => parseHttpBodyRequest(Buffer.from(text), max);

test('decodes standard and URL-safe base64, with or without padding; no data is an empty body', () => {
  expect(parse('{"httpBody": {"contentType": "a/b", "data": "AAEC/w=="}}')).toEqual({ contentType: 'a/b', data: Buffer.from([0, 1, 2, 255]) });
  expect(parse('{"httpBody": {"data": "AAEC_w"}}')).toEqual({ contentType: undefined, data: Buffer.from([0, 1, 2, 255]) });
  expect(parse('{"httpBody": {"contentType": "", "extensions": []}}')).toEqual({ contentType: undefined, data: Buffer.alloc(0) });
});

test.each([
  ['[1]', 'invalid_payload', /^expected a JSON object/],
  ['{"httpbody": {}}', 'invalid_payload', /^httpBody: required/],
  ['{"httpBody": null}', 'invalid_payload', 'httpBody: expected an object, got null'],
  ['{"httpBody": []}', 'invalid_payload', 'httpBody: expected an object, got a list'],
  ['{"httpBody": {"data": 5}}', 'invalid_payload', 'httpBody.data: expected a base64 string, got number'],
  ['{"httpBody": {"data": "A"}}', 'invalid_payload', 'httpBody.data: expected a base64 string, got a string that is not base64'],
  ['{"httpBody": {"data": "AA==="}}', 'invalid_payload', 'httpBody.data: expected a base64 string, got a string that is not base64'],
  ['{"httpBody": {"contentType": {}}}', 'invalid_payload', 'httpBody.contentType: expected a string, got an object'],
  ['{"httpBody": {"contentType": "text/plain\\ud800"}}', 'invalid_payload', 'httpBody.contentType: "text/plain\\ud800" is not a valid Content-Type header value (printable ASCII only)'],
  ['{"httpBody": {"contentType": "a/b\\r\\nX-Injected: 1"}}', 'invalid_payload', 'httpBody.contentType: "a/b\\r\\nX-Injected: 1" is not a valid Content-Type header value (printable ASCII only)'],
  ['{"httpBody": {"contentType": "application/jsön"}}', 'invalid_payload', 'httpBody.contentType: "application/jsön" is not a valid Content-Type header value (printable ASCII only)'],
  ['{"httpBody": ', 'invalid_json', /^invalid JSON/],
])('%s is refused (%s)', (text, code, message) => {
  const err = thrownBy(() => parse(text), ApiError);
  expect(err.code).toBe(code);
  expect(err.message).toMatch(message);
});

test('the decoded size is held to the limit', () => {
  expect(() => parse(`{"httpBody": {"data": "${Buffer.alloc(11).toString('base64')}"}}`, 10)).toThrow('httpBody.data holds 11 bytes, more than the limit of 10');
});

test('the answer is proto3 JSON of an HttpBody', () => {
  expect(httpBodyAnswer('text/csv', Buffer.from('a,b')).toString()).toBe('{"contentType":"text/csv","data":"YSxi"}');
  expect(httpBodyAnswer(undefined, Buffer.alloc(0)).toString()).toBe('{"contentType":"","data":""}');
});

test.each([
  ['/v1/projects/p/locations/l/endpoints/e:rawPredict?$alt=json%3Benum-encoding=int', true],
  ['/v1/projects/p/locations/l/endpoints/e:rawPredict?%24alt=json', true],
  ['/v1/projects/p/locations/l/endpoints/e:rawPredict?$alt=proto', false],
  ['/v1/projects/p/locations/l/endpoints/e:rawPredict', false],
  ['/v1/projects/p/locations/l/endpoints/e:rawPredict?alt=json', false],
])('%s asks for proto3 JSON: %s', (url, expected) => {
  expect(wantsProtoJson(url)).toBe(expected);
});
