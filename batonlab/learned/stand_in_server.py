# SPDX-License-Identifier: BSD-3-Clause
"""A local server speaking OpenAI's chat-completions API whose answers come from Python oracles.

It stands in for a model server in tests and for users without one: the client talks real HTTP to it,
so retries, timeouts, the cache and the concurrency limit are exercised exactly as against vLLM or
Ollama. A question holding two images goes to `preference_oracle(image_a, image_b, text)`, anything
else to `text_oracle(messages, body)`; what the oracle returns is the answer. Faults can be injected
for the next requests (error statuses, delays, unparsable answers, bodies that are not JSON).

It serves `POST /v1/chat/completions` and `GET /v1/models` on 127.0.0.1 only, on a free port::

    with StandInServer(preference_oracle=lambda a, b, text: "A" if a.mean() > b.mean() else "B") as server:
        client = ChatClient(ChatClientCfg(base_url=server.base_url, model=server.model))
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from batonlab.learned.chat_client import decode_png_data_url

log = logging.getLogger("batonlab.learned.stand_in_server")

PreferenceOracle = Callable[[np.ndarray, np.ndarray, str], str]
"""(image_a, image_b, text) -> answer; images RGB uint8 (H, W, 3), text the question's text parts joined."""
TextOracle = Callable[[list[dict], dict], str]
"""(messages, body) -> answer, for every question that does not hold exactly two images."""

MALFORMED_ANSWER = "I think the first one, probably"
"""What `malformed_next` answers: a hedge that is no preference label."""
GARBAGE_BODY = b"<html><body>upstream hiccup</body></html>"
"""What `garbage_next` sends with status 200: a body that is not JSON."""


class StandInServer:
    """A ThreadingHTTPServer on 127.0.0.1 (free port) in a daemon thread; use it as a context manager."""

    def __init__(
        self,
        preference_oracle: PreferenceOracle | None = None,
        text_oracle: TextOracle | None = None,
        model: str = "batonlab-stand-in",
        delay_s: float = 0.0,
    ):
        """
        Args:
            preference_oracle: answers questions holding exactly two images; None answers them with HTTP 400.
            text_oracle: answers every other question; None answers them with HTTP 400.
            model: the one model served; a request naming another gets 404, as from a real server.
            delay_s: wait before answering every chat request, so that concurrency is observable [s].
        """
        self.preference_oracle = preference_oracle
        self.text_oracle = text_oracle
        self.model = model
        self.delay_s = delay_s
        self.last_request: dict | None = None
        """The parsed JSON body of the latest chat request."""
        self.last_headers: dict[str, str] = {}
        """The headers of the latest chat request, names lower-cased."""
        self._requests = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._fail: deque[int] = deque()
        self._delays: deque[float] = deque()
        self._garbage = 0
        self._malformed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Life cycle.

    def start(self) -> StandInServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("the stand-in server is already running")
        self._stop.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.stand_in = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stand-in-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and free the port; requests still waiting on a delay are cut short."""
        if self._httpd is None:
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> StandInServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # Properties.

    @property
    def base_url(self) -> str:
        """"http://127.0.0.1:PORT/v1", the value for `ChatClientCfg.base_url`."""
        if self._httpd is None:
            raise RuntimeError("the stand-in server is not running; use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        """Chat requests received so far, answered or not."""
        with self._lock:
            return self._requests

    @property
    def max_in_flight(self) -> int:
        """The most chat requests that were being served at the same time."""
        with self._lock:
            return self._max_in_flight

    # Fault injection.

    def fail_next(self, n: int, status: int = 500) -> None:
        """The next n chat requests get HTTP `status` with an OpenAI-style error body."""
        with self._lock:
            self._fail.extend([status] * n)

    def delay_next(self, n: int, seconds: float) -> None:
        """The next n chat requests wait `seconds` (on top of delay_s) before being answered [s]."""
        with self._lock:
            self._delays.extend([seconds] * n)

    def malformed_next(self, n: int) -> None:
        """The next n answers are MALFORMED_ANSWER instead of the oracle's."""
        with self._lock:
            self._malformed += n

    def garbage_next(self, n: int) -> None:
        """The next n chat requests get HTTP 200 with GARBAGE_BODY, which is not JSON."""
        with self._lock:
            self._garbage += n

    # Request handling (called from the handler threads).

    def _serve_chat(self, raw: bytes, headers: dict[str, str]) -> tuple[int, dict | bytes]:
        """(status, JSON payload or raw body) for one chat request.

        A request takes at most one response fault, the first queued of fail, garbage, malformed;
        a delay is taken independently of those.
        """
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self.last_headers = headers
            delay_s = self.delay_s + (self._delays.popleft() if self._delays else 0.0)
            fault = None
            if self._fail:
                fault = self._fail.popleft()
            elif self._garbage:
                self._garbage -= 1
                fault = "garbage"
            elif self._malformed:
                self._malformed -= 1
                fault = "malformed"
        # The count drops before the answer is sent, so a client cannot start its next request while
        # this one still counts: max_in_flight then measures the client's own limit.
        try:
            return self._answer(raw, delay_s, fault)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, raw: bytes, delay_s: float, fault: int | str | None) -> tuple[int, dict | bytes]:
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "invalid_request_error", "the request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "invalid_request_error", "the request needs a 'messages' list")
        with self._lock:
            self.last_request = body
        if delay_s > 0:
            self._stop.wait(delay_s)
        if isinstance(fault, int):
            return _error(fault, "server_error", f"injected failure (HTTP {fault})")
        if fault == "garbage":
            return 200, GARBAGE_BODY
        if body.get("model") != self.model:
            message = f"model {body.get('model')!r} does not exist; this server serves {self.model!r}"
            return _error(404, "model_not_found", message)
        if fault == "malformed":
            return 200, self._completion(MALFORMED_ANSWER)
        try:
            answer = self._ask_oracle(body)
        except _OracleError as error:
            return _error(error.status, "invalid_request_error" if error.status < 500 else "server_error", str(error))
        return 200, self._completion(answer)

    def _ask_oracle(self, body: dict) -> str:
        images, texts = [], []
        for message in body["messages"]:
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image_url":
                    image_url = part.get("image_url")
                    images.append(image_url.get("url", "") if isinstance(image_url, dict) else str(image_url))
        if len(images) == 2:
            if self.preference_oracle is None:
                raise _OracleError(400, "this stand-in server has no preference oracle (two-image questions)")
            try:
                image_a, image_b = (decode_png_data_url(url) for url in images)
            except ValueError as error:
                raise _OracleError(400, f"bad image: {error}") from None
            oracle, args = self.preference_oracle, (image_a, image_b, "\n".join(texts))
        else:
            if self.text_oracle is None:
                raise _OracleError(400, "this stand-in server has no text oracle")
            oracle, args = self.text_oracle, (body["messages"], body)
        try:
            answer = oracle(*args)
        except Exception as error:  # an oracle bug reaches the client as a server error, like a crashed model server
            raise _OracleError(500, f"oracle raised {type(error).__name__}: {error}") from None
        if not isinstance(answer, str):
            raise _OracleError(500, f"oracle returned {type(answer).__name__}, not str")
        return answer

    def _completion(self, content: str) -> dict:
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def _models(self) -> dict:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "batonlab"}]}


class _OracleError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _error(status: int, kind: str, message: str) -> tuple[int, dict]:
    return status, {"error": {"message": message, "type": kind, "param": None, "code": kind}}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    stand_in: StandInServer

    def handle_error(self, request, client_address) -> None:
        """A client that gave up (timeout) and closed its socket is normal here, not worth a traceback."""
        log.debug("stand-in server: error while serving %s", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def do_POST(self) -> None:
        """Serve POST /v1/chat/completions; 404 for any other path."""
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(*_error(404, "not_found", f"no route POST {self.path}"))
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._send(*self.server.stand_in._serve_chat(raw, headers))

    def do_GET(self) -> None:
        """Serve GET /v1/models; 404 for any other path."""
        if self.path.rstrip("/") != "/v1/models":
            self._send(*_error(404, "not_found", f"no route GET {self.path}"))
            return
        self._send(200, self.server.stand_in._models())

    def log_message(self, format: str, *args) -> None:
        """Silent: one stderr line per request would drown test and training output."""

    def _send(self, status: int, payload: dict | bytes) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            log.debug("stand-in server: the client left before its answer was sent")
