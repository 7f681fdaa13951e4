// google.api.HttpBody in proto3 JSON: the form of rawPredict that the official client libraries send
// over REST (`?$alt=json`): {"httpBody": {"contentType": "...", "data": "<base64>"}} in, and
// {"contentType": "...", "data": "<base64>"} out. Pure: bytes to bytes, errors name the field.
import { ApiError } from '../errors.js';
import { parseBody } from './prepare.js';
import { decodeBase64, kindPhrase } from './instances.js';

export interface HttpBody {
  contentType?: string;
  data: Buffer;
}

/** Printable ASCII, spaces and tabs: what a Content-Type header value may hold. */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

const invalid = (message: string): ApiError => new ApiError('invalid_payload', message);

/** The HttpBody of a `$alt=json` rawPredict request body. */
export function parseHttpBodyRequest(raw: Buffer, maxBytes: number): HttpBody {
  const v = parseBody(raw, false);
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw invalid('expected a JSON object {"httpBody": {"contentType": string, "data": base64 string}}');
  const hb = (v as Record<string, unknown>).httpBody;
  if (hb === undefined) throw invalid('httpBody: required (the $alt=json form of rawPredict carries {"httpBody": {"contentType", "data"}})');
  if (hb === null || typeof hb !== 'object' || Array.isArray(hb)) throw invalid(`httpBody: expected an object, got ${kindPhrase(hb)}`);
  const { contentType, data } = hb as Record<string, unknown>;
  if (contentType !== undefined && typeof contentType !== 'string') throw invalid(`httpBody.contentType: expected a string, got ${kindPhrase(contentType)}`);
  // It becomes the Content-Type header of the call to the model: a header value, in ASCII.
  if (typeof contentType === 'string' && !HEADER_VALUE.test(contentType)) throw invalid(`httpBody.contentType: ${JSON.stringify(contentType.slice(0, 100))} is not a valid Content-Type header value (printable ASCII only)`);
  // proto3 JSON `bytes`: standard or URL-safe base64, padding optional.
  const bytes = data === undefined ? Buffer.alloc(0) : typeof data === 'string' ? decodeBase64(data) : null;
  if (bytes === null) {
    throw invalid(`httpBody.data: expected a base64 string, got ${typeof data === 'string' ? 'a string that is not base64' : kindPhrase(data)}`);
  }
  if (bytes.length > maxBytes) throw new ApiError('payload_too_large', `httpBody.data holds ${bytes.length} bytes, more than the limit of ${maxBytes}`);
  return { contentType: contentType === '' ? undefined : contentType, data: bytes };
}

/** The HttpBody answer, as proto3 JSON. */
export function httpBodyAnswer(contentType: string | undefined, data: Buffer): Buffer {
  return Buffer.from(JSON.stringify({ contentType: contentType ?? '', data: data.toString('base64') }));
}
