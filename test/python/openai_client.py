"""The OpenAI Python SDK (openai, pinned in requirements.txt) against the gateway's OpenAI-compatible
routes of one Endpoint; prints one JSON line with what the SDK returned.

Usage: openai_client.py BASE_URL
  BASE_URL is the Endpoint's path on the gateway, e.g.
  http://127.0.0.1:PORT/v1/projects/default/locations/local/endpoints/tiny-llm
  (the SDK posts to BASE_URL/chat/completions).

It makes three calls, in order, each with max_tokens 5 and the user message "Say hi":
  whole    chat.completions.create(...)               the answer's content, finish_reason and usage
  stream   chat.completions.create(..., stream=True)  every chunk's delta content, role and finish_reason
  refused  chat.completions.create(messages=[])       the exception the SDK raised (class, status, message)
The output is {"ok": true, "sdk": VERSION, "whole": {...}, "stream": {...}, "refused": {...}}, or
{"ok": false, "exception": ..., "message": ...} when a call that should have worked raised.
Retries are off (max_retries=0): a gateway failure shows as it is, not hidden by a second try.
"""
import json
import os
import sys

# Loopback only: no proxy from the caller's environment, no key or base URL of theirs.
for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
    os.environ.pop(var, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

import openai  # noqa: E402  (after the environment is cleaned)

MESSAGES = [{"role": "user", "content": "Say hi"}]


def main() -> None:
    base_url = sys.argv[1]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30.0)
    out: dict = {"ok": True, "sdk": openai.__version__}
    try:
        whole = client.chat.completions.create(model="tiny-llm", messages=MESSAGES, max_tokens=5)
        out["whole"] = {
            "object": whole.object,
            "model": whole.model,
            "content": whole.choices[0].message.content,
            "role": whole.choices[0].message.role,
            "finish_reason": whole.choices[0].finish_reason,
            "usage": whole.usage.model_dump() if whole.usage else None,
        }
        chunks = []
        for chunk in client.chat.completions.create(model="tiny-llm", messages=MESSAGES, max_tokens=5, stream=True):
            choice = chunk.choices[0] if chunk.choices else None
            chunks.append({
                "object": chunk.object,
                "role": choice.delta.role if choice else None,
                "content": choice.delta.content if choice else None,
                "finish_reason": choice.finish_reason if choice else None,
                "usage": chunk.usage.model_dump() if chunk.usage else None,
            })
        out["stream"] = {"chunks": chunks, "text": "".join(c["content"] or "" for c in chunks)}
    except Exception as err:  # a call that should have worked
        print(json.dumps({"ok": False, "exception": f"{type(err).__module__}.{type(err).__name__}", "message": str(err)}))
        return
    try:
        client.chat.completions.create(model="tiny-llm", messages=[], max_tokens=5)
        out["refused"] = {"raised": None}
    except openai.APIStatusError as err:
        out["refused"] = {
            "raised": type(err).__name__,
            "status": err.status_code,
            "message": err.message,
            "code": err.code,
            "type": err.type,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
