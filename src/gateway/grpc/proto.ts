// The protobuf messages of the gRPC surface: the part of Vertex AI's PredictionService
// (google.cloud.aiplatform.v1 and v1beta1, which agree on these messages' fields) that the gateway
// serves (Explain's explanation_spec_override is left out: like REST's explanationSpecOverride, the
// gateway's models have no explanation settings to override), with google.api.HttpBody and google.protobuf's Value, Struct and Any, as protobufjs types.
// Field names and numbers are Vertex's own (prediction_service.proto), so the official clients'
// messages decode here unchanged.
import protobuf from 'protobufjs';

const SOURCE = `
syntax = "proto3";
package google.cloud.aiplatform.v1;
import "google/protobuf/struct.proto";
import "google/api/httpbody.proto";

message PredictRequest {
  string endpoint = 1;
  repeated google.protobuf.Value instances = 2;
  google.protobuf.Value parameters = 3;
  map<string, string> labels = 4;
}

message PredictResponse {
  repeated google.protobuf.Value predictions = 1;
  string deployed_model_id = 2;
  string model = 3;
  string model_display_name = 4;
  string model_version_id = 5;
  google.protobuf.Value metadata = 6;
}

message ExplainRequest {
  string endpoint = 1;
  repeated google.protobuf.Value instances = 2;
  google.protobuf.Value parameters = 4;
  string deployed_model_id = 3;
}

message ExplainResponse {
  repeated Explanation explanations = 1;
  string deployed_model_id = 2;
  repeated google.protobuf.Value predictions = 3;
}

message Explanation {
  repeated Attribution attributions = 1;
  repeated Neighbor neighbors = 2;
}

message Attribution {
  double baseline_output_value = 1;
  double instance_output_value = 2;
  google.protobuf.Value feature_attributions = 3;
  repeated int32 output_index = 4;
  string output_display_name = 5;
  double approximation_error = 6;
  string output_name = 7;
}

message Neighbor {
  string neighbor_id = 1;
  double neighbor_distance = 2;
}

message RawPredictRequest {
  string endpoint = 1;
  google.api.HttpBody http_body = 2;
}

message StreamRawPredictRequest {
  string endpoint = 1;
  google.api.HttpBody http_body = 2;
}
`;

const HTTP_BODY = `
syntax = "proto3";
package google.api;
import "google/protobuf/any.proto";

message HttpBody {
  string content_type = 1;
  bytes data = 2;
  repeated google.protobuf.Any extensions = 3;
}
`;

/** google.api.HttpBody as decoded (bytes as a Buffer) and as written. */
export interface HttpBodyMessage {
  content_type?: string;
  data?: Uint8Array;
}

/** google.protobuf.Value as decoded: `kind` names the field that is set. */
export interface ValueMessage {
  kind?: 'nullValue' | 'numberValue' | 'stringValue' | 'boolValue' | 'structValue' | 'listValue';
  /** google.protobuf.NullValue: 0. */
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: { fields?: Record<string, ValueMessage> };
  listValue?: { values?: ValueMessage[] };
}

export interface PredictRequestMessage {
  endpoint?: string;
  instances?: ValueMessage[];
  parameters?: ValueMessage | null;
}

export interface PredictResponseMessage {
  predictions: ValueMessage[];
  deployed_model_id: string;
  model?: string;
  model_display_name?: string;
  model_version_id?: string;
  metadata?: ValueMessage;
}

export interface ExplainRequestMessage extends PredictRequestMessage {
  deployed_model_id?: string;
}

export interface AttributionMessage {
  baseline_output_value?: number;
  instance_output_value?: number;
  feature_attributions?: ValueMessage;
  output_index?: number[];
  output_display_name?: string;
  approximation_error?: number;
  output_name?: string;
}

export interface ExplanationMessage {
  attributions: AttributionMessage[];
  neighbors: { neighbor_id?: string; neighbor_distance?: number }[];
}

export interface ExplainResponseMessage {
  explanations: ExplanationMessage[];
  deployed_model_id: string;
  predictions: ValueMessage[];
}

export interface RawPredictRequestMessage {
  endpoint?: string;
  http_body?: HttpBodyMessage | null;
}

function buildRoot(): protobuf.Root {
  const root = new protobuf.Root();
  for (const file of ['google/protobuf/struct.proto', 'google/protobuf/any.proto']) {
    const common = protobuf.common.get(file);
    if (!common?.nested) throw new Error(`protobufjs lacks its common file ${file}`);
    root.addJSON(common.nested);
  }
  protobuf.parse(HTTP_BODY, root, { keepCase: true });
  protobuf.parse(SOURCE, root, { keepCase: true });
  root.resolveAll();
  return root;
}

const root = buildRoot();

/** One message type's wire form both ways. */
export interface Codec<T> {
  decode(bytes: Buffer): T;
  encode(message: T): Buffer;
}

function codec<T>(name: string): Codec<T> {
  const type = root.lookupType(name);
  return {
    decode: (bytes) => type.decode(bytes) as unknown as T,
    encode: (message) => {
      const bytes = type.encode(message as Record<string, unknown>).finish();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
  };
}

export const PredictRequest = codec<PredictRequestMessage>('google.cloud.aiplatform.v1.PredictRequest');
export const PredictResponse = codec<PredictResponseMessage>('google.cloud.aiplatform.v1.PredictResponse');
export const ExplainRequest = codec<ExplainRequestMessage>('google.cloud.aiplatform.v1.ExplainRequest');
export const ExplainResponse = codec<ExplainResponseMessage>('google.cloud.aiplatform.v1.ExplainResponse');
export const RawPredictRequest = codec<RawPredictRequestMessage>('google.cloud.aiplatform.v1.RawPredictRequest');
export const StreamRawPredictRequest = codec<RawPredictRequestMessage>('google.cloud.aiplatform.v1.StreamRawPredictRequest');
export const HttpBody = codec<HttpBodyMessage>('google.api.HttpBody');
