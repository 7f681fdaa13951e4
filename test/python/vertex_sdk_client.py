"""Runs one Vertex AI SDK (google-cloud-aiplatform) call against the gateway and prints one JSON line.

The command is a JSON object, in argv[1] or on stdin:
  {"op": "predict", "api_endpoint": "http://127.0.0.1:PORT", "project": "default", "location": "us-central1",
   "endpoint": "half-plus-two", "instances": [1.0, 2.0], "parameters": {...}}
  {"op": "predict_via_raw", ...same...}          Endpoint.predict(use_raw_predict=True)
  {"op": "raw_predict", ..., "body": "text" | "body_b64": "...", "headers": {"Content-Type": "..."}}
  {"op": "endpoint", ...}                        the Endpoint resource as the SDK reads it
  {"op": "tls_cert", "hosts": ["us-central1-aiplatform.googleapis.com"], "cert": PATH, "key": PATH}
                                                 a self-signed certificate for the test's TLS front
Optional: "token" (the bearer token, default "test-token"), or "token_file" (a file holding it, read
again whenever the SDK refreshes, as a pod's projected ServiceAccount token is), "timeout" (seconds).

How the SDK is pointed at the gateway, and what it sends (read from google-cloud-aiplatform 2.7.0):
- aiplatform.init(api_endpoint="http://127.0.0.1:PORT", api_transport="rest", credentials=...): the
  REST transport takes the scheme from api_endpoint, so plain http works for every GAPIC call.
- aiplatform.Endpoint(name) does no I/O; the first use GETs the Endpoint resource
  (GET /v1/projects/P/locations/L/endpoints/E?$alt=json;enum-encoding=int) and GETs it again on each
  use while the answer has no createTime. `dedicatedEndpointEnabled` true would send predict to
  https://{dedicatedEndpointDns}/v1/...:predict instead.
- predict: POST /v1/projects/P/locations/L/endpoints/E:predict?$alt=json;enum-encoding=int with
  {"instances": [...], "parameters": ...}; errors raise google.api_core.exceptions by HTTP status
  (400 -> BadRequest, message "POST <url>: <error.message>").
- raw_predict: requests' AuthorizedSession POSTs the raw body to a hard-coded
  https://{location}-aiplatform.googleapis.com/v1/projects/P/locations/L/endpoints/E:rawPredict
  (api_endpoint is ignored). The test reaches the gateway there without touching the SDK: HTTPS_PROXY
  points at its CONNECT proxy on loopback, which terminates TLS with a certificate from op tls_cert
  (trusted through REQUESTS_CA_BUNDLE) and forwards to the gateway. No name is ever resolved here:
  with a proxy, requests hands the host name to the proxy.
- Credentials: google.oauth2.credentials.Credentials(token=...), a fixed token that never refreshes
  (a 401 then makes google-auth raise RefreshError), or TokenFileCredentials (a token file re-read on
  refresh: after a 401 and its retries the SDK raises the gateway's Unauthorized);
  google.auth.default() is never called (project and credentials are given), and the metadata server
  settings point at a dead loopback port besides.
"""
import base64
import json
import os
import sys

# Before any google import: nothing may look for a metadata server or other credentials.
os.environ["NO_GCE_CHECK"] = "True"
os.environ["GCE_METADATA_HOST"] = "127.0.0.1:9"
os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUD_ML_PROJECT_ID", "GOOGLE_API_USE_CLIENT_CERTIFICATE"):
    os.environ.pop(var, None)
# Loopback is never proxied (HTTPS_PROXY is meant for raw_predict's https URL only).
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


def tls_cert(cmd: dict) -> dict:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    hosts = cmd["hosts"]
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    with open(cmd["key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(cmd["cert"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return {"ok": True, "cert": cmd["cert"], "key": cmd["key"]}


def token_file_credentials(path: str):
    """Credentials whose token is the content of a file, read again on each refresh."""
    import google.auth.credentials

    class TokenFileCredentials(google.auth.credentials.Credentials):
        def __init__(self) -> None:
            super().__init__()
            self.path = path
            self.refresh(None)

        def refresh(self, request) -> None:
            with open(self.path, encoding="utf-8") as f:
                self.token = f.read().strip()

    return TokenFileCredentials()


def sdk_call(cmd: dict) -> dict:
    import google.oauth2.credentials
    from google.api_core import exceptions as core_exceptions
    from google.cloud import aiplatform

    aiplatform.init(
        project=cmd["project"],
        location=cmd["location"],
        api_endpoint=cmd["api_endpoint"],
        api_transport="rest",
        credentials=token_file_credentials(cmd["token_file"]) if "token_file" in cmd else google.oauth2.credentials.Credentials(token=cmd.get("token", "test-token")),
    )
    endpoint = aiplatform.Endpoint(cmd["endpoint"])
    op = cmd["op"]
    timeout = cmd.get("timeout")
    try:
        if op in ("predict", "predict_via_raw"):
            p = endpoint.predict(instances=cmd["instances"], parameters=cmd.get("parameters"), timeout=timeout, use_raw_predict=op == "predict_via_raw")
            return {
                "ok": True,
                "predictions": p.predictions,
                "deployed_model_id": p.deployed_model_id,
                "model_version_id": p.model_version_id,
                "model_resource_name": p.model_resource_name,
                "metadata": p.metadata,
            }
        if op == "raw_predict":
            body = base64.b64decode(cmd["body_b64"]) if "body_b64" in cmd else cmd.get("body", "").encode()
            r = endpoint.raw_predict(body=body, headers=cmd.get("headers", {}), timeout=timeout)
            return {
                "ok": True,
                "status": r.status_code,
                "url": r.url,
                "content_type": r.headers.get("Content-Type"),
                "headers": {k.lower(): v for k, v in r.headers.items() if k.lower().startswith("x-vertex-ai-") or k.lower() == "x-request-id"},
                "body": r.content.decode("utf-8", errors="replace"),
            }
        if op == "endpoint":
            return {
                "ok": True,
                "resource_name": endpoint.resource_name,
                "display_name": endpoint.display_name,
                "traffic_split": endpoint.traffic_split,
                "dedicated_endpoint_enabled": endpoint.dedicated_endpoint_enabled,
                "deployed_models": [
                    {"id": m.id, "display_name": m.display_name, "model": m.model, "model_version_id": m.model_version_id}
                    for m in endpoint.list_models()
                ],
            }
        raise ValueError(f"unknown op {op!r}")
    except core_exceptions.GoogleAPICallError as e:
        return {
            "ok": False,
            "exception": f"{type(e).__module__}.{type(e).__name__}",
            "code": e.code,
            "message": e.message,
            "str": str(e),
        }
    except Exception as e:  # anything else the SDK raises (requests errors, KeyError on a missing header...)
        return {"ok": False, "exception": f"{type(e).__module__}.{type(e).__name__}", "message": str(e)}


def main() -> None:
    cmd = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    result = tls_cert(cmd) if cmd.get("op") == "tls_cert" else sdk_call(cmd)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
