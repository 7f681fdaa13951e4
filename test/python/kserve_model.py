"""A tiny KServe custom model for the gateway's tests: half-plus-two (y = x/2 + 2) on V1 protocol.

KServe's own Python model server (kserve.Model + kserve.ModelServer), the way KServe's custom-model
examples run it, serving:
  POST /v1/models/<name>:predict   {"instances": [1, [2, 3], ...]} -> {"predictions": [2.5, [3.0, 3.5], ...]}
  GET  /v1/models/<name>           200 {"name": <name>, "ready": true} once loaded (the health route)

Errors, as KServe renders them (asserted by the tests through the gateway):
  a string or boolean instance  -> kserve.errors.InvalidInput  -> 400 {"error": "<message>"}
  any other instance (null, {}) -> the TypeError of x / 2      -> 500 {"error": "TypeError : <message>"}

Started as one process (workers=1: uvicorn serves in this process, no fork; gRPC off) that exits
on SIGTERM. It listens on AIP_HTTP_HOST (default 127.0.0.1, never all interfaces) : AIP_HTTP_PORT
(the Vertex container contract), and serves the model named by --model_name, else
$KSERVE_MODEL_NAME, else "half-plus-two".
"""
import argparse
import os
from typing import Any, Dict

import kserve
from kserve.errors import InvalidInput
from kserve.protocol.rest import server as rest_server

parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
args, _ = parser.parse_known_args()


def half_plus_two(x: Any, path: str) -> Any:
    if isinstance(x, list):
        return [half_plus_two(v, f"{path}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, (str, bool)):
        raise InvalidInput(f"{path}: expected a number or a list of numbers, got {type(x).__name__} {x!r}")
    # Anything else that is not a number (null, an object) fails here, as an unexpected model error would.
    return x / 2 + 2


class HalfPlusTwo(kserve.Model):
    def __init__(self, name: str):
        super().__init__(name)
        self.load()

    def load(self) -> bool:
        self.ready = True
        return self.ready

    async def predict(self, payload: Dict, headers: Dict[str, str] = None, response_headers: Dict[str, str] = None) -> Dict:
        instances = payload.get("instances") if isinstance(payload, dict) else None
        if not isinstance(instances, list):
            raise InvalidInput('expected a JSON object with an "instances" list')
        return {"predictions": [half_plus_two(x, f"instances[{i}]") for i, x in enumerate(instances)]}


def bind_loopback() -> None:
    """KServe's REST server binds 0.0.0.0 with no option to change it: bind AIP_HTTP_HOST instead."""
    host = os.environ.get("AIP_HTTP_HOST", "127.0.0.1")
    original = rest_server.RESTServer.__init__

    def init(self, *a, **kw):
        original(self, *a, **kw)
        self.config.host = host

    rest_server.RESTServer.__init__ = init


if __name__ == "__main__":
    name = args.model_name if args.model_name != "model" else os.environ.get("KSERVE_MODEL_NAME", "half-plus-two")
    port = int(os.environ.get("AIP_HTTP_PORT", args.http_port))
    bind_loopback()
    kserve.ModelServer(http_port=port, workers=1, enable_grpc=False).start([HalfPlusTwo(name)])
