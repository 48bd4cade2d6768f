"""A fake Anthropic Messages API: a real local HTTP server driven by a script.

Owns the server side of the wire format that the real ``anthropic`` SDK (2.x)
speaks: ``POST /v1/messages`` (JSON or SSE), ``POST /v1/messages/count_tokens``,
auth, error bodies, and the faults a test needs (dropped sockets, missing
``message_stop``, ``event: error``, held streams, retryable statuses).

Invariants:
- every response carries a ``request-id`` header (``req_011…``);
- each ``POST /v1/messages`` that passes auth and validation consumes exactly
  one scripted step, first in first out; an empty queue answers 500 with
  ``x-should-retry: false`` so the SDK never retries it;
- token figures are deterministic: ``tokens(x)`` is a quarter of the canonical
  JSON length, rounded up, and a prompt costs the sum over its blocks, so
  ``input + cache_read + cache_creation == prompt_tokens(body)`` always;
- ``close()`` never hangs: it wakes held streams and shuts every connection.

Only the standard library is used on the server side; the SDK is the client.
"""

import hashlib
import json
import math
import random
import socket
import string
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

MAX_BREAKPOINTS = 4
DEFAULT_LOOKBACK = 20
TINY_RETRY_AFTER = 0.001  # the SDK ignores 0 and falls back to its own 0.5 s+ backoff

_ALNUM = string.ascii_letters + string.digits
_ERROR_TYPES = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Billing error"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    408: ("timeout_error", "Request timed out"),
    409: ("conflict_error", "Conflict"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes"),
    429: ("rate_limit_error", "Rate limited"),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Gateway timeout"),
    529: ("overloaded_error", "Overloaded"),
}


# --- ids and token arithmetic -------------------------------------------------

def _random_id(prefix: str, length: int = 22) -> str:
    return prefix + "".join(random.choices(_ALNUM, k=length))


def canonical(x: object) -> bytes:
    """The canonical JSON bytes every token count and cache key is based on."""
    return json.dumps(x, sort_keys=True, separators=(",", ":")).encode()


def tokens(x: object) -> int:
    """Fake token count of any JSON value: ceil(len(canonical JSON) / 4)."""
    return math.ceil(len(canonical(x)) / 4)


def _strip_cache_control(x: object) -> object:
    if isinstance(x, dict):
        return {k: _strip_cache_control(v) for k, v in x.items() if k != "cache_control"}
    if isinstance(x, list):
        return [_strip_cache_control(v) for v in x]
    return x


def _as_blocks(content: object) -> list:
    """A string stands for one text block, as the API treats it."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


@dataclass
class _PromptBlock:
    """One tool, system block or message content block, in prompt order."""
    ident: list
    tokens: int
    cache_control: dict | None


def _prompt_block(where: list, block: object) -> _PromptBlock:
    bare = _strip_cache_control(block)
    control = block.get("cache_control") if isinstance(block, dict) else None
    return _PromptBlock([*where, bare], tokens(bare), control)


def _prompt_blocks(body: dict) -> list[_PromptBlock]:
    """The prompt as blocks: tools, then system, then each message's content."""
    blocks = [_prompt_block(["tools"], t) for t in body.get("tools") or []]
    blocks += [_prompt_block(["system"], b) for b in _as_blocks(body.get("system"))]
    for i, message in enumerate(body.get("messages") or []):
        where = ["messages", i, message.get("role")]
        blocks += [_prompt_block(where, b) for b in _as_blocks(message.get("content"))]
    if body.get("cache_control") and blocks and not blocks[-1].cache_control:
        blocks[-1].cache_control = body["cache_control"]  # automatic caching
    return blocks


def prompt_tokens(body: dict) -> int:
    """Total prompt tokens a request body is billed (and count_tokens returns)."""
    return sum(b.tokens for b in _prompt_blocks(body))


class _BadRequest(Exception):
    """A request the real API would refuse with 400 invalid_request_error."""


class _PromptCache:
    """Remembers written prefixes by hash and bills one request against them."""

    def __init__(self, min_tokens: int, lookback: int):
        self.min_tokens = min_tokens
        self.lookback = lookback
        self.written: set[str] = set()
        self.lock = threading.Lock()

    def bill(self, body: dict) -> dict:
        """Usage counts for a request, writing its new breakpoint prefixes."""
        blocks = _prompt_blocks(body)
        breakpoints = [i for i, b in enumerate(blocks) if b.cache_control]
        totals = _running_totals(blocks)
        hashes = _prefix_hashes(body.get("model"), blocks)
        with self.lock:
            read_end = self._longest_hit(breakpoints, hashes)
            written = self._write(blocks, breakpoints, read_end, totals, hashes)
        read = totals[read_end] if read_end >= 0 else 0
        created = written["ephemeral_5m_input_tokens"] + written["ephemeral_1h_input_tokens"]
        return {"input_tokens": totals[-1] - read - created if totals else 0,
                "cache_creation_input_tokens": created,
                "cache_read_input_tokens": read,
                "cache_creation": written}

    def _longest_hit(self, breakpoints: list[int], hashes: list[str]) -> int:
        """Index of the last block of the longest cached prefix, or -1."""
        best = -1
        for bp in breakpoints:
            for end in range(bp, max(bp - self.lookback, 0) - 1, -1):
                if hashes[end] in self.written:
                    best = max(best, end)
                    break
        return best

    def _write(self, blocks, breakpoints, read_end, totals, hashes) -> dict:
        written = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
        later = [bp for bp in breakpoints if bp > read_end]
        if not later or totals[later[-1]] < self.min_tokens:
            return written  # too short to cache: silently nothing, as the API does
        start = totals[read_end] if read_end >= 0 else 0
        for bp in later:
            ttl = blocks[bp].cache_control.get("ttl", "5m")
            written[f"ephemeral_{'1h' if ttl == '1h' else '5m'}_input_tokens"] += totals[bp] - start
            start = totals[bp]
            if totals[bp] >= self.min_tokens:
                self.written.add(hashes[bp])
        return written

    def clear(self) -> None:
        with self.lock:
            self.written.clear()


def _running_totals(blocks: list[_PromptBlock]) -> list[int]:
    totals, total = [], 0
    for block in blocks:
        total += block.tokens
        totals.append(total)
    return totals


def _prefix_hashes(model: object, blocks: list[_PromptBlock]) -> list[str]:
    """sha256 of model + blocks[:i+1] for every i (newline-separated JSON is unambiguous)."""
    digest = hashlib.sha256(canonical(model) + b"\n")
    hashes = []
    for block in blocks:
        digest.update(canonical(block.ident) + b"\n")
        hashes.append(digest.copy().hexdigest())
    return hashes


# --- scripted steps -----------------------------------------------------------

def text(s: str) -> dict:
    """A text content block."""
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict, id: str | None = None) -> dict:
    """A tool_use content block with a real-looking id unless one is given."""
    return {"type": "tool_use", "id": id or _random_id("toolu_01"), "name": name, "input": input}


def thinking(s: str, signature: str | None = None) -> dict:
    """A thinking block; the default signature is derived from the text."""
    signature = signature or "sig-" + hashlib.sha256(s.encode()).hexdigest()[:16]
    return {"type": "thinking", "thinking": s, "signature": signature}


def redacted_thinking(data: str) -> dict:
    """A redacted_thinking block (streamed whole, with no deltas)."""
    return {"type": "redacted_thinking", "data": data}


@dataclass
class Reply:
    """A scripted assistant message, plus the faults to inject while sending it."""
    content: list[dict]
    stop_reason: str
    usage: dict = field(default_factory=dict)
    stop_details: dict | None = None
    cut_after: int | None = None
    no_message_stop: bool = False
    error_event_after: int | None = None
    delay: float = 0.0
    hold_after: int | None = None
    model: str | None = None


@dataclass
class Failure:
    """A scripted HTTP error response."""
    status: int
    error_type: str
    message: str
    headers: dict[str, str]


Step = Reply | Failure


def reply(*blocks: dict | str, stop_reason: str | None = None, usage: dict | None = None,
          stop_details: dict | None = None, cut_after: int | None = None,
          no_message_stop: bool = False, error_event_after: int | None = None,
          delay: float = 0.0, hold_after: int | None = None, model: str | None = None) -> Reply:
    """Build a scripted reply; a bare string is a text block.

    stop_reason defaults to "tool_use" when a tool_use block is present, else
    "end_turn". Fault counts N refer to SSE frames already sent, ping included.
    """
    content = [text(b) if isinstance(b, str) else b for b in blocks]
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return Reply(content, stop_reason, dict(usage or {}), stop_details, cut_after,
                 no_message_stop, error_event_after, delay, hold_after, model)


def error_response(status: int, message: str | None = None, *, error_type: str | None = None,
                   retry_after: float | None = None, should_retry: bool | None = None,
                   headers: dict | None = None) -> Failure:
    """Build a scripted error; statuses the SDK retries get a tiny retry-after."""
    default_type, default_message = _ERROR_TYPES.get(status, ("api_error", f"HTTP {status}"))
    if retry_after is None and (status in (408, 409, 429) or status >= 500):
        retry_after = TINY_RETRY_AFTER
    sent = {}
    if retry_after is not None:
        sent["retry-after"] = f"{retry_after:g}"
        sent["retry-after-ms"] = f"{retry_after * 1000:g}"
    if should_retry is not None:
        sent["x-should-retry"] = "true" if should_retry else "false"
    sent.update(headers or {})
    return Failure(status, error_type or default_type, message or default_message, sent)


def _error_body(error_type: str, message: str, request_id: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}


# --- SSE rendering ------------------------------------------------------------

def _halves(s: str) -> list[str]:
    """Two chunks, so every block exercises delta accumulation."""
    middle = len(s) // 2
    return [s[:middle], s[middle:]]


def _block_events(index: int, block: dict) -> list[tuple[str, dict]]:
    kind = block.get("type")
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": part}
                  for part in _halves(json.dumps(block["input"]))]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": part} for part in _halves(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted_thinking and unknown future blocks arrive whole
        start, deltas = block, []
    return ([("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
            + [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
               for d in deltas]
            + [("content_block_stop", {"type": "content_block_stop", "index": index})])


def _delta_usage(usage: dict, cumulative_input: bool) -> dict:
    keys = ["output_tokens", "output_tokens_details", "server_tool_use"]
    if cumulative_input:
        keys += ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
    return {k: usage[k] for k in keys if k in usage}


def _stream_events(message: dict, *, cumulative_input: bool = False,
                  no_message_stop: bool = False) -> list[tuple[str, dict]]:
    """The (event, data) pairs that stream a complete message the way the API does."""
    start = {**message, "content": [], "stop_reason": None, "stop_details": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    if no_message_stop:  # a truncated stream: no stop_reason ever arrives
        return events
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None,
             "stop_details": message["stop_details"]}
    events.append(("message_delta", {"type": "message_delta", "delta": delta,
                                      "usage": _delta_usage(message["usage"], cumulative_input)}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _frame(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


# --- HTTP plumbing ------------------------------------------------------------

@dataclass
class Recorded:
    """One request as received."""
    method: str
    path: str
    headers: dict[str, str]
    body: dict | None
    raw: bytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # close() shuts the sockets itself; joining could wait on keep-alive

    def __init__(self, api: "FakeAPI"):
        self.api = api
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    """Thin HTTP layer: reads requests, writes JSON, SSE chunks and cut sockets."""
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.api._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.api._track(self.connection, False)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # client went away or close() shut the socket
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.server.api._serve(self)

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def send_json(self, status: int, body: dict, headers: dict[str, str], cut: bool = False) -> None:
        data = json.dumps(body).encode()
        self._head(status, {**headers, "content-type": "application/json",
                            "content-length": str(len(data))})
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self.cut()
        else:
            self.wfile.write(data)

    def start_sse(self, headers: dict[str, str]) -> None:
        self._head(200, {**headers, "content-type": "text/event-stream",
                         "cache-control": "no-cache", "transfer-encoding": "chunked"})

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def cut(self, partial: bytes = b"") -> None:
        """Drop the connection, after announcing a chunk and sending half of it."""
        if partial:
            self.wfile.write(b"%x\r\n%s" % (len(partial), partial[: len(partial) // 2]))
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# --- the fake API -------------------------------------------------------------

class FakeAPI:
    """A scripted Messages API on 127.0.0.1; use as a context manager."""

    def __init__(self, *, min_cache_tokens: int = 0, api_key: str | None = None,
                 lookback: int = DEFAULT_LOOKBACK):
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self.held = threading.Event()
        self.base_url = ""
        self._cache = _PromptCache(min_cache_tokens, lookback)
        self._steps: deque[Step] = deque()
        self._cond = threading.Condition()
        self._release_generation = 0
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> "FakeAPI":
        """Bind a random port and serve in a daemon thread."""
        if self._server is None:
            self._server = _Server(self)
            self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            kwargs={"poll_interval": 0.05}, daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake held streams and drop every open connection."""
        if self._server is None or self._stopping.is_set():
            return
        with self._cond:
            self._stopping.set()
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()
        with self._cond:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeAPI":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # what tests drive and inspect

    def script(self, *steps: Step | dict | str) -> None:
        """Queue replies for POST /v1/messages; a bare block or string is wrapped in reply()."""
        with self._cond:
            self._steps.extend(s if isinstance(s, (Reply, Failure)) else reply(s) for s in steps)

    def pending(self) -> int:
        """Scripted steps not consumed yet."""
        with self._cond:
            return len(self._steps)

    @property
    def message_requests(self) -> list[Recorded]:
        """Only the POST /v1/messages requests, in order."""
        with self._cond:
            return [r for r in self.requests if r.method == "POST" and _route(r.path) == "/v1/messages"]

    def wait_for_requests(self, n: int, timeout: float = 10) -> None:
        """Block until at least n POST /v1/messages were received."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._message_requests_unlocked()) >= n, timeout):
                got = len(self._message_requests_unlocked())
                raise AssertionError(f"expected {n} /v1/messages requests within {timeout}s, got {got}")

    def release(self) -> None:
        """Unblock every stream currently held by hold_after."""
        with self._cond:
            self._release_generation += 1
            self.held.clear()
            self._cond.notify_all()

    def clear_cache(self) -> None:
        """Forget every cached prefix, as if all cache entries had expired."""
        self._cache.clear()

    # server side

    def _message_requests_unlocked(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and _route(r.path) == "/v1/messages"]

    def _track(self, connection: socket.socket, alive: bool) -> None:
        with self._cond:
            (self._connections.add if alive else self._connections.discard)(connection)

    def _record(self, handler: _Handler, raw: bytes) -> Recorded:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in handler.headers.items()}
        recorded = Recorded(handler.command, handler.path, headers, body, raw)
        with self._cond:
            self.requests.append(recorded)
            self._cond.notify_all()
        return recorded

    def _serve(self, handler: _Handler) -> None:
        recorded = self._record(handler, handler.read_body())
        request_id = _random_id("req_011", 24)
        route = {"/v1/messages": self._messages, "/v1/messages/count_tokens": self._count_tokens}
        serve = route.get(_route(recorded.path)) if recorded.method == "POST" else None
        if not self._authorized(recorded.headers):
            self._fail(handler, request_id, error_response(401))
        elif serve is None:
            self._fail(handler, request_id, error_response(404, f"Not found: {recorded.method} {recorded.path}"))
        elif not isinstance(recorded.body, dict):
            self._fail(handler, request_id, error_response(400, "request body must be a JSON object"))
        else:
            serve(handler, recorded.body, request_id)

    def _authorized(self, headers: dict[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        keys = {headers.get("x-api-key", ""), bearer[7:] if bearer.startswith("Bearer ") else ""} - {""}
        return bool(keys) and (self.api_key is None or self.api_key in keys)

    def _fail(self, handler: _Handler, request_id: str, failure: Failure) -> None:
        handler.send_json(failure.status, _error_body(failure.error_type, failure.message, request_id),
                          {"request-id": request_id, **failure.headers})

    def _count_tokens(self, handler: _Handler, body: dict, request_id: str) -> None:
        try:
            _validate(body)
        except _BadRequest as e:
            return self._fail(handler, request_id, error_response(400, str(e)))
        handler.send_json(200, {"input_tokens": prompt_tokens(body)}, {"request-id": request_id})

    def _messages(self, handler: _Handler, body: dict, request_id: str) -> None:
        try:
            _validate(body)
        except _BadRequest as e:
            return self._fail(handler, request_id, error_response(400, str(e)))
        step = self._next_step()
        if step is None:
            empty = error_response(500, "fake API: no scripted response left", should_retry=False)
            return self._fail(handler, request_id, empty)
        if isinstance(step, Failure):
            return self._fail(handler, request_id, step)
        message = _message(step, body, self._cache.bill(body))
        if body.get("stream"):
            self._stream(handler, step, message, request_id)
        else:
            self._answer(handler, step, message, request_id)

    def _next_step(self) -> Step | None:
        with self._cond:
            return self._steps.popleft() if self._steps else None

    def _answer(self, handler: _Handler, step: Reply, message: dict, request_id: str) -> None:
        """Non-streaming: delay and hold_after apply before the body; cut_after halves it."""
        if step.delay:
            self._stopping.wait(step.delay)
        if step.hold_after is not None and not self._hold():
            return handler.cut()
        handler.send_json(200, message, {"request-id": request_id}, cut=step.cut_after is not None)

    def _stream(self, handler: _Handler, step: Reply, message: dict, request_id: str) -> None:
        cumulative = len(self.message_requests) % 2 == 0  # the API only sometimes repeats input counts
        frames = [_frame(*e) for e in _stream_events(message, cumulative_input=cumulative,
                                                    no_message_stop=step.no_message_stop)]
        handler.start_sse({"request-id": request_id})
        for sent in range(len(frames) + 1):
            if sent == step.hold_after and not self._hold():
                return handler.cut()
            if sent == step.cut_after:
                return handler.cut(frames[sent] if sent < len(frames) else _frame("ping", {"type": "ping"}))
            if sent == step.error_event_after:
                error = _error_body("overloaded_error", "Overloaded", request_id)
                handler.write_chunk(_frame("error", error))
                break
            if sent == len(frames):
                break
            if sent and step.delay and self._stopping.wait(step.delay):
                return handler.cut()
            handler.write_chunk(frames[sent])
        handler.end_chunks()

    def _hold(self) -> bool:
        """Park until release() or close(); False when the server is closing."""
        with self._cond:
            generation = self._release_generation
            self.held.set()
            self._cond.wait_for(lambda: self._release_generation != generation or self._stopping.is_set())
            return not self._stopping.is_set()


def _route(path: str) -> str:
    return urlsplit(path).path


def _validate(body: dict) -> None:
    """Refuse, as the API would, bodies whose prompt cannot be read or cached."""
    for name in ("model", "messages"):
        if name not in body:
            raise _BadRequest(f"{name}: Field required")
    for name in ("messages", "tools"):
        if not all(isinstance(item, dict) for item in _listed(body, name)):
            raise _BadRequest(f"{name}: Input should be a list of objects")
    if not isinstance(body.get("system") or "", (str, list)):
        raise _BadRequest("system: Input should be a string or a list of blocks")
    if not all(isinstance(m.get("content") or "", (str, list)) for m in body["messages"]):
        raise _BadRequest("messages.content: Input should be a string or a list of blocks")
    found = sum(1 for b in _prompt_blocks(body) if b.cache_control)
    if found > MAX_BREAKPOINTS:
        raise _BadRequest(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                          f"Found {found}.")


def _usage(step: Reply, billed: dict) -> dict:
    """Computed usage with the step's overrides; an overridden write total keeps its TTL split consistent."""
    usage = {**billed, "output_tokens": tokens(step.content), "service_tier": "standard", **step.usage}
    if "cache_creation_input_tokens" in step.usage and "cache_creation" not in step.usage:
        usage["cache_creation"] = {"ephemeral_5m_input_tokens": step.usage["cache_creation_input_tokens"],
                                   "ephemeral_1h_input_tokens": 0}
    return usage


def _listed(body: dict, name: str) -> list:
    value = body.get(name) or []
    if not isinstance(value, list):
        raise _BadRequest(f"{name}: Input should be a valid list")
    return value


def _message(step: Reply, body: dict, billed: dict) -> dict:
    return {"id": _random_id("msg_01"), "type": "message", "role": "assistant",
            "model": step.model or body["model"], "content": step.content,
            "stop_reason": step.stop_reason, "stop_sequence": None, "stop_details": step.stop_details,
            "container": None, "diagnostics": None, "usage": _usage(step, billed)}


@pytest.fixture
def fake_api():
    """A started FakeAPI, closed after the test."""
    with FakeAPI() as api:
        yield api
