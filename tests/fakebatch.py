"""The three batch APIs, served by a :class:`tests.fakeserver.FakeLLMServer` as the official
SDKs call them, so that evalnb's batch mode is tested through the real SDK code.

* OpenAI: ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}/content``,
  ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first).
* Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``GET /v1/messages/batches`` (newest first), ``GET .../{id}/results`` (JSONL).
* Gemini: ``POST /{v}/models/{model}:batchGenerateContent`` (inline requests, or a file
  uploaded by the resumable protocol at ``POST /upload/{v}/files``), ``GET /{v}/batches/{id}``,
  ``GET /{v}/batches``, ``GET /{v}/files/{id}:download`` (a file input's results).

Each batched request is answered exactly as the live endpoint would answer it: it takes the
server's queued replies and :attr:`FakeLLMServer.responder` in request order, and is rendered
by the same per-API renderer, so a batch run and a live run on the same replies see the same
answers. The requests are kept in :attr:`FakeBatches.requests` as the live API would have
received them (a body per request), not in the server's own ``requests``.

A batch's state moves on a schedule the test sets, counted in retrieves, never in time:
queued at creation, running, ended after :attr:`FakeBatches.steps` retrieves (unless
:attr:`FakeBatches.hold` is set). :attr:`FakeBatches.end_as` scripts whole-batch outcomes
(``"failed"``, ``"expired"``) for the next batches to end; :attr:`FakeBatches.expire_if`
expires single requests.

Usage::

    with FakeLLMServer() as srv:
        batches = FakeBatches(srv)
        ...
        assert len(batches.created) == 1
"""

from __future__ import annotations

import collections
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import parse_qs

from tests.fakeserver import (_RENDERERS, Empty, Error, FakeLLMServer, RecordedRequest, Refusal, Reply, Text,
                              WrongShape, _estimate_tokens, _gemini_prompt, _HttpRequest, _json_bytes, _json_wire,
                              _messages_prompt, _Wire, _wrong_shape, request_identity)

__all__ = ["FakeBatches", "FakeBatch", "GRPC_CODES"]

# HTTP status -> google.rpc.Code, for a Gemini request that failed inside a batch.
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 429: 8, 499: 1, 500: 13, 501: 12, 503: 14, 504: 4}

_GEMINI_CREATE = re.compile(r"^/(?P<v>v1beta|v1|v1alpha)/models/(?P<model>[^:/]+):batchGenerateContent$")
_GEMINI_BATCH = re.compile(r"^/(?P<v>v1beta|v1|v1alpha)/batches(?:/(?P<id>[^/:]+))?$")
_OPENAI_BATCH = re.compile(r"^/v1/batches(?:/(?P<id>[^/]+))?$")
_OPENAI_FILE = re.compile(r"^/v1/files(?:/(?P<id>[^/]+)/content)?$")
_ANTHROPIC_BATCH = re.compile(r"^/v1/messages/batches(?:/(?P<id>[^/]+)(?P<results>/results)?)?$")
_GEMINI_UPLOAD = re.compile(r"^/upload/(?:v1beta|v1|v1alpha)/files$")
_GEMINI_DOWNLOAD = re.compile(r"^/(?:v1beta|v1|v1alpha)/files/(?P<id>[^/:]+):download$")


@dataclass
class FakeBatch:
    api: str
    id: str
    model: str
    tag: str | None                     # OpenAI metadata.evalnb_tag, Gemini displayName
    metadata: dict[str, Any]
    created: float
    items: list[tuple[str, RecordedRequest]]   # (custom id or metadata key, the request)
    polls: int = 0
    state: str = "queued"               # queued, running, ended, failed, expired
    ended_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)   # the API's own result objects
    output_file: str | None = None      # OpenAI
    error_file: str | None = None       # OpenAI


class FakeBatches:
    """The batch APIs on ``server``; see the module docstring."""

    def __init__(self, server: FakeLLMServer, *, steps: int = 1) -> None:
        self.server = server
        self.steps = steps              # retrieves before a batch ends
        self.hold = False               # while set, no batch ends
        self.end_as: collections.deque[str] = collections.deque()   # "failed" / "expired" for the next ends
        self.expire_if: Callable[[RecordedRequest], bool] | None = None
        self.batches: dict[str, FakeBatch] = {}
        self.created: list[FakeBatch] = []           # in creation order
        self.requests: list[RecordedRequest] = []    # every batched request, in submission order
        self.files: dict[str, tuple[str, bytes]] = {}   # OpenAI file id -> (filename, content)
        self.retrieves = 0
        self._uploads: dict[str, tuple[dict[str, Any], bytearray]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        server.routes.append(self._route)

    # -- scripting ---------------------------------------------------------------------------

    def release(self) -> None:
        self.hold = False

    def tags(self) -> list[str | None]:
        return [b.tag for b in self.created]

    # -- routing -----------------------------------------------------------------------------

    def _route(self, req: _HttpRequest, path: str) -> _Wire | None:
        query = parse_qs(req.target.split("?", 1)[1]) if "?" in req.target else {}
        with self._lock:
            if m := _OPENAI_FILE.match(path):
                if req.method == "POST" and not m["id"]:
                    return self._openai_upload(req)
                if req.method == "GET" and m["id"]:
                    return self._file_content(m["id"])
            if m := _OPENAI_BATCH.match(path):
                if req.method == "POST" and not m["id"]:
                    return self._openai_create(req)
                if req.method == "GET":
                    return self._get("openai", m["id"]) if m["id"] else self._list("openai", query)
            if m := _ANTHROPIC_BATCH.match(path):
                if req.method == "POST" and not m["id"]:
                    return self._anthropic_create(req)
                if req.method == "GET" and m["results"]:
                    return self._anthropic_results(m["id"])
                if req.method == "GET":
                    return self._get("anthropic", m["id"]) if m["id"] else self._list("anthropic", query)
            if _GEMINI_UPLOAD.match(path) and req.method == "POST":
                return self._gemini_upload(req, query)
            if (m := _GEMINI_DOWNLOAD.match(path)) and req.method == "GET":
                return self._file_content(f"files/{m['id']}")
            if (m := _GEMINI_CREATE.match(path)) and req.method == "POST":
                return self._gemini_create(req, m["model"])
            if (m := _GEMINI_BATCH.match(path)) and req.method == "GET":
                return self._get("gemini", m["id"]) if m["id"] else self._list("gemini", query)
        return None

    # -- creation ----------------------------------------------------------------------------

    def _new(self, api: str, model: str, tag: str | None, metadata: dict[str, Any],
             items: list[tuple[str, str, dict[str, Any]]]) -> FakeBatch:
        """``items``: (custom id, path the live API would have seen, the live body)."""
        n = next(self._ids)
        batch_id = {"openai": f"batch_{n:06d}", "anthropic": f"msgbatch_{n:06d}", "gemini": f"fakebatch{n:06d}"}[api]
        recorded = []
        for custom_id, live_path, body in items:
            if api == "gemini":
                prompt, _ = _gemini_prompt(body)
            else:
                prompt, _ = _messages_prompt(body)
            request = RecordedRequest(api=api, path=live_path, headers={}, body=body, model=model,
                                      prompt=prompt, time=time.monotonic())
            self.requests.append(request)
            recorded.append((custom_id, request))
        batch = FakeBatch(api, batch_id, model, tag, metadata, time.time(), recorded)
        self.batches[batch_id] = batch
        self.created.append(batch)
        return batch

    def _openai_upload(self, req: _HttpRequest) -> _Wire:
        parts = _multipart(req)
        filename, content = parts["file"]
        file_id = f"file-{next(self._ids):06d}"
        self.files[file_id] = (filename or "upload.jsonl", content)
        return _json_wire(200, {"id": file_id, "object": "file", "bytes": len(content),
                                "created_at": int(time.time()), "filename": filename or "upload.jsonl",
                                "purpose": parts.get("purpose", (None, b"batch"))[1].decode(), "status": "processed"})

    def _file_content(self, file_id: str) -> _Wire:
        if file_id not in self.files:
            return _json_wire(404, {"error": {"message": f"No such File object: {file_id}", "type": "invalid_request_error",
                                              "param": "id", "code": None}})
        return _Wire(200, {}, self.files[file_id][1], content_type="application/octet-stream")

    def _openai_create(self, req: _HttpRequest) -> _Wire:
        body = json.loads(req.body)
        name, content = self.files[body["input_file_id"]]
        items = []
        for line in content.decode("utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                items.append((entry["custom_id"], entry["url"], entry["body"]))
        model = str(items[0][2].get("model", "")) if items else ""
        metadata = body.get("metadata") or {}
        batch = self._new("openai", model, metadata.get("evalnb_tag"), metadata, items)
        batch.metadata["_input_file_id"] = body["input_file_id"]
        batch.metadata["_endpoint"] = body["endpoint"]
        return _json_wire(200, self._openai_view(batch))

    def _anthropic_create(self, req: _HttpRequest) -> _Wire:
        body = json.loads(req.body)
        items = [(r["custom_id"], "/v1/messages", r["params"]) for r in body["requests"]]
        model = str(items[0][2].get("model", "")) if items else ""
        batch = self._new("anthropic", model, None, {}, items)
        return _json_wire(200, self._anthropic_view(batch))

    def _gemini_create(self, req: _HttpRequest, model: str) -> _Wire:
        body = json.loads(req.body)["batch"]
        live_path = f"/v1beta/models/{model}:generateContent"
        source = body["inputConfig"]
        if "fileName" in source:   # a JSONL file uploaded with client.files: {"key", "request"} per line
            _, content = self.files[source["fileName"]]
            lines = [json.loads(line) for line in content.decode("utf-8").splitlines() if line.strip()]
            items = [(line["key"], live_path, line["request"]) for line in lines]
        else:
            inline = source["requests"]["requests"]
            items = [((r.get("metadata") or {}).get("key", str(i)), live_path, r["request"])
                     for i, r in enumerate(inline)]
        batch = self._new("gemini", model, body.get("displayName"), {}, items)
        batch.metadata["_input_file"] = source.get("fileName")
        return _json_wire(200, self._gemini_view(batch))

    def _gemini_upload(self, req: _HttpRequest, query: dict[str, list[str]]) -> _Wire:
        """The resumable upload protocol as google-genai speaks it: a start request that
        returns the upload URL, then chunks, the last one with ``finalize``."""
        if "upload_id" not in query:
            upload_id = f"upload{next(self._ids):06d}"
            meta = json.loads(req.body or b"{}").get("file") or {}
            self._uploads[upload_id] = (meta, bytearray())
            url = f"{self.server.url}/upload/v1beta/files?upload_id={upload_id}"
            return _Wire(200, {"x-goog-upload-url": url, "x-goog-upload-status": "active"}, b"{}")
        meta, content = self._uploads[query["upload_id"][0]]
        content += req.body
        if "finalize" not in req.headers.get("x-goog-upload-command", ""):
            return _Wire(200, {"x-goog-upload-status": "active"}, b"")
        name = f"files/in{next(self._ids):06d}"
        self.files[name] = (meta.get("displayName") or name, bytes(content))
        file = {"name": name, "displayName": meta.get("displayName"), "mimeType": meta.get("mimeType"),
                "sizeBytes": str(len(content)), "state": "ACTIVE", "uri": f"{self.server.url}/v1beta/{name}"}
        return _json_wire(200, {"file": file}, {"x-goog-upload-status": "final"})

    # -- progress ----------------------------------------------------------------------------

    def _get(self, api: str, batch_id: str) -> _Wire:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != api:
            return _not_found(api, batch_id)
        self.retrieves += 1
        batch.polls += 1
        if batch.state in ("queued", "running"):
            if self.hold or batch.polls < self.steps:
                batch.state = "running"
            else:
                self._end(batch, self.end_as.popleft() if self.end_as else "ended")
        return _json_wire(200, self._view(batch))

    def _end(self, batch: FakeBatch, outcome: str) -> None:
        """Answer every request as the live endpoint would (or none: a whole failure)."""
        batch.ended_at = time.time()
        batch.state = outcome
        if outcome in ("failed", "expired"):
            # Anthropic has no whole-batch failure: a batch ends with every request expired or errored.
            if batch.api == "anthropic":
                result = {"type": "expired"} if outcome == "expired" else {"type": "errored", "error": {
                    "type": "error", "error": {"type": "api_error", "message": "fake: internal error"},
                    "request_id": None}}
                batch.results = [{"custom_id": cid, "result": result} for cid, _ in batch.items]
            return
        results = []
        for custom_id, request in batch.items:
            if self.expire_if is not None and self.expire_if(request):
                results.append(self._expired(batch.api, custom_id))
                continue
            identity = request_identity(request.api, request.model, request.prompt)
            reply = self.server._next_reply(request, identity)
            if not isinstance(reply, (Text, Refusal, Empty, Error, WrongShape)):
                reply = Error(500, f"fake batch: unsupported reply {reply!r}")
            if isinstance(reply, (Text, Refusal, Empty)):
                self.server._count_success(identity)
            results.append(self._result(batch.api, custom_id, reply, request))
        batch.results = results
        if batch.api == "gemini" and batch.metadata.get("_input_file"):   # results as a file too
            lines = [{"key": r["metadata"]["key"], **{k: v for k, v in r.items() if k != "metadata"}}
                     for r in results]
            batch.output_file = self._store_file(f"{batch.id}_responses.jsonl", lines, prefix="files/out")
        if batch.api == "openai":
            ok = [r for r in results if r["response"] and r["response"]["status_code"] == 200]
            bad = [r for r in results if not (r["response"] and r["response"]["status_code"] == 200)]
            batch.output_file = self._store_file(f"{batch.id}_output.jsonl", ok) if ok else None
            batch.error_file = self._store_file(f"{batch.id}_error.jsonl", bad) if bad else None

    def _store_file(self, name: str, lines: list[dict[str, Any]], prefix: str = "file-") -> str:
        file_id = f"{prefix}{next(self._ids):06d}"
        self.files[file_id] = (name, b"".join(_json_bytes(line) + b"\n" for line in lines))
        return file_id

    def _result(self, api: str, custom_id: str, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        n = next(self._ids)
        tokens = _estimate_tokens(_all_text(api, request.body))
        if isinstance(reply, WrongShape):
            status, headers, body = 200, {"x-request-id": f"req_{n}"}, _wrong_shape(api, request.model, n, tokens,
                                                                                     reply.null)
        else:
            status, headers, body = _RENDERERS[api](reply, request.model, n, tokens)
        if api == "openai":
            return {"id": f"batch_req_{n}", "custom_id": custom_id,
                    "response": {"status_code": status, "request_id": headers.get("x-request-id"), "body": body},
                    "error": None}
        if api == "anthropic":
            if status == 200:
                return {"custom_id": custom_id, "result": {"type": "succeeded", "message": body}}
            return {"custom_id": custom_id, "result": {"type": "errored", "error": body | {"request_id": None}}}
        meta = {"key": custom_id}
        if status == 200:
            return {"response": body, "metadata": meta}
        error = body["error"]
        return {"error": {"code": GRPC_CODES.get(status, 2), "message": error["message"]}, "metadata": meta}

    def _expired(self, api: str, custom_id: str) -> dict[str, Any]:
        if api == "openai":
            return {"id": f"batch_req_{next(self._ids)}", "custom_id": custom_id, "response": None,
                    "error": {"code": "batch_expired", "message": "This request could not be executed before the "
                                                                  "completion window expired."}}
        if api == "anthropic":
            return {"custom_id": custom_id, "result": {"type": "expired"}}
        return {"error": {"code": 4, "message": "Deadline expired before the request was processed."},
                "metadata": {"key": custom_id}}

    def _anthropic_results(self, batch_id: str) -> _Wire:
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != "anthropic":
            return _not_found("anthropic", batch_id)
        payload = b"".join(_json_bytes(r) + b"\n" for r in batch.results)
        return _Wire(200, {}, payload, content_type="application/binary")

    # -- views -------------------------------------------------------------------------------

    def _view(self, batch: FakeBatch) -> dict[str, Any]:
        return {"openai": self._openai_view, "anthropic": self._anthropic_view,
                "gemini": self._gemini_view}[batch.api](batch)

    def _list(self, api: str, query: dict[str, list[str]]) -> _Wire:
        newest = [b for b in reversed(self.created) if b.api == api]
        if api == "gemini":
            return _json_wire(200, {"operations": [self._gemini_view(b) for b in newest]})
        limit = int(query.get("limit", ["20"])[0])
        after = query.get("after", query.get("after_id", [None]))[0]
        if after is not None:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1:] if after in ids else []
        page = newest[:limit]
        view = self._openai_view if api == "openai" else self._anthropic_view
        body: dict[str, Any] = {"data": [view(b) for b in page], "has_more": len(newest) > limit,
                                "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None}
        if api == "openai":
            body["object"] = "list"
        return _json_wire(200, body)

    def _openai_view(self, b: FakeBatch) -> dict[str, Any]:
        status = {"queued": "validating", "running": "in_progress", "ended": "completed",
                  "failed": "failed", "expired": "expired"}[b.state]
        done = [r for r in b.results if r["response"] and r["response"]["status_code"] == 200]
        view: dict[str, Any] = {
            "id": b.id, "object": "batch", "endpoint": b.metadata.get("_endpoint", "/v1/chat/completions"),
            "errors": None, "input_file_id": b.metadata.get("_input_file_id", ""), "completion_window": "24h",
            "status": status, "output_file_id": b.output_file, "error_file_id": b.error_file,
            "created_at": int(b.created), "in_progress_at": int(b.created) if b.state != "queued" else None,
            "expires_at": int(b.created) + 86400,
            "completed_at": int(b.ended_at) if b.ended_at and b.state == "ended" else None,
            "failed_at": int(b.ended_at) if b.ended_at and b.state == "failed" else None,
            "expired_at": int(b.ended_at) if b.ended_at and b.state == "expired" else None,
            "request_counts": {"total": len(b.items), "completed": len(done),
                               "failed": len(b.results) - len(done)},
            "metadata": {k: v for k, v in b.metadata.items() if not k.startswith("_")},
        }
        if b.state == "failed":
            view["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message":
                                                          "fake: the batch failed as a whole", "line": None}]}
        return view

    def _anthropic_view(self, b: FakeBatch) -> dict[str, Any]:
        counts = collections.Counter(r["result"]["type"] for r in b.results)
        ended = b.state not in ("queued", "running")
        return {
            "id": b.id, "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {"processing": 0 if ended else len(b.items), "succeeded": counts["succeeded"],
                               "errored": counts["errored"], "canceled": counts["canceled"],
                               "expired": counts["expired"]},
            "ended_at": _iso(b.ended_at) if ended else None, "created_at": _iso(b.created),
            "expires_at": _iso(b.created + 86400), "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"{self.server.url}/v1/messages/batches/{b.id}/results" if ended else None,
        }

    def _gemini_view(self, b: FakeBatch) -> dict[str, Any]:
        state = {"queued": "BATCH_STATE_PENDING", "running": "BATCH_STATE_RUNNING", "ended": "BATCH_STATE_SUCCEEDED",
                 "failed": "BATCH_STATE_FAILED", "expired": "BATCH_STATE_EXPIRED"}[b.state]
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{b.model}", "displayName": b.tag, "name": f"batches/{b.id}",
            "createTime": _iso(b.created), "updateTime": _iso(b.ended_at or b.created), "state": state,
            "batchStats": {"requestCount": str(len(b.items))},
        }
        if b.ended_at:
            metadata["endTime"] = _iso(b.ended_at)
        if b.state == "ended" and b.output_file:
            metadata["output"] = {"responsesFile": b.output_file}
        elif b.state == "ended":
            metadata["output"] = {"inlinedResponses": {"inlinedResponses": b.results}}
        view: dict[str, Any] = {"name": f"batches/{b.id}", "metadata": metadata}
        if b.state in ("ended", "failed", "expired"):
            view["done"] = True
        return view


def _all_text(api: str, body: dict[str, Any]) -> str:
    return (_gemini_prompt(body) if api == "gemini" else _messages_prompt(body))[1]


def _not_found(api: str, batch_id: str) -> _Wire:
    if api == "anthropic":
        return _json_wire(404, {"type": "error", "error": {"type": "not_found_error", "message": f"{batch_id}"}})
    if api == "gemini":
        return _json_wire(404, {"error": {"code": 404, "message": f"{batch_id} not found", "status": "NOT_FOUND"}})
    return _json_wire(404, {"error": {"message": f"No batch {batch_id}", "type": "invalid_request_error",
                                      "param": None, "code": None}})


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z") if t is not None else None


def _multipart(req: _HttpRequest) -> dict[str, tuple[str | None, bytes]]:
    """The form fields of a multipart/form-data body: name -> (filename, content)."""
    match = re.search(r'boundary="?([^";]+)"?', req.headers.get("content-type", ""))
    if not match:
        raise ValueError("multipart body without a boundary")
    delimiter = b"--" + match.group(1).encode("latin-1")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in req.body.split(delimiter)[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        disposition = head.decode("latin-1")
        name = re.search(r'name="([^"]*)"', disposition)
        filename = re.search(r'filename="([^"]*)"', disposition)
        if name:
            fields[name.group(1)] = (filename.group(1) if filename else None, content.removesuffix(b"\r\n"))
    return fields
