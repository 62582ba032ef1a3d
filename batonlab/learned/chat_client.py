# SPDX-License-Identifier: BSD-3-Clause
"""A client for OpenAI-compatible chat-completions servers, with images, retries and a disk cache.

Design and contract notes: docs/modules/batonlab.learned.chat_client.md.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import logging
import os
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import cv2
import numpy as np

from batonlab.utils.files import atomic_write_text

log = logging.getLogger("batonlab.learned.chat_client")

ENV_BASE_URL = "BATONLAB_LLM_BASE_URL"
ENV_MODEL = "BATONLAB_LLM_MODEL"
ENV_API_KEY = "BATONLAB_LLM_API_KEY"
ENV_API_KEY_FALLBACK = "OPENAI_API_KEY"

PREFERENCE_PROMPT = (
    "Task: {task}. Two images show two states of the robot and its scene, seen by the same camera. "
    "Which image shows the state closer to completing the task? "
    "Answer with exactly one letter: A or B."
)

_RETRIED_STATUS = frozenset({408, 429})
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass
class ChatClientCfg:
    """Where the chat-completions server is and how patiently to talk to it."""

    base_url: str = ""
    """API root with the version, e.g. "http://127.0.0.1:8000/v1"; requests go to base_url + "/chat/completions"."""
    model: str = ""
    """Model name as the server knows it (vLLM: the served name; Ollama: the pulled tag)."""
    api_key: str | None = None
    """Sent as `Authorization: Bearer <key>` when set; local servers usually accept any value."""
    timeout_s: float = 30.0
    """Socket timeout of one HTTP attempt (connect, and each wait for data) [s]."""
    max_retries: int = 3
    """Retries after the first attempt of one request (so at most max_retries + 1 attempts)."""
    backoff_s: float = 0.5
    """Wait before retry k (k = 0, 1, ...): backoff_s * 2**k, plus up to 10% jitter [s]."""
    max_concurrency: int = 4
    """Most HTTP requests in flight at once from one client (also the worker count of `ask_preferences`)."""
    cache_dir: str | None = None
    """Folder of cached answers (one JSON file per question); None disables the cache."""
    temperature: float = 0.0
    """Default sampling temperature (0 = greedy, the deterministic answer a cache can keep)."""
    max_tokens: int = 512
    """Most tokens the model may generate per answer [tokens]."""

    @classmethod
    def from_env(cls, **overrides) -> ChatClientCfg:
        """A config from keyword overrides, then the environment for base_url, model and api_key.

        Reads BATONLAB_LLM_BASE_URL, BATONLAB_LLM_MODEL and BATONLAB_LLM_API_KEY (falling back to
        OPENAI_API_KEY) for those of the three not given. An override of None counts as not given, so a
        CLI can pass its optional flags straight through. Empty environment variables count as unset.

        Raises:
            ValueError: base_url or model is missing from both, or an override is not a config field.
        """
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"ChatClientCfg has no field(s) {unknown}; fields: {sorted(known)}")
        values = {key: value for key, value in overrides.items() if value is not None}
        from_environment = {
            "base_url": os.environ.get(ENV_BASE_URL),
            "model": os.environ.get(ENV_MODEL),
            "api_key": os.environ.get(ENV_API_KEY) or os.environ.get(ENV_API_KEY_FALLBACK),
        }
        for key, value in from_environment.items():
            if key not in values and value:
                values[key] = value
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ValueError naming the config key and environment variable of whatever is missing or wrong."""
        missing = []
        if not self.base_url:
            missing.append(f"base_url (env {ENV_BASE_URL}, e.g. http://127.0.0.1:8000/v1)")
        if not self.model:
            missing.append(f"model (env {ENV_MODEL}, the name the server serves)")
        if missing:
            raise ValueError("chat client is not configured: missing " + "; ".join(missing))
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")


# Image and answer formats.


def encode_png_data_url(image: np.ndarray) -> str:
    """An RGB uint8 image (H, W, 3) as a "data:image/png;base64,..." URL (PNG: lossless, so a cache key is stable)."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected an RGB uint8 image of shape (H, W, 3), got {image.dtype} {image.shape}")
    ok, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise ValueError(f"PNG encoding failed for an image of shape {image.shape}")
    return "data:image/png;base64," + base64.b64encode(png.tobytes()).decode("ascii")


def decode_png_data_url(url: str) -> np.ndarray:
    """The RGB uint8 image (H, W, 3) of a base64 image data URL (the inverse of `encode_png_data_url`).

    Raises:
        ValueError: not a base64 data URL, or the bytes are not an image.
    """
    header, sep, payload = url.partition(",")
    if not sep or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise ValueError(f"not a base64 image data URL: {url[:40]!r}")
    data = np.frombuffer(base64.b64decode(payload, validate=True), dtype=np.uint8)
    image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("the data URL holds no decodable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def parse_preference(content: str) -> int | None:
    """0 for an answer "A", 1 for "B", None for anything else.

    Strict on purpose: a hedged answer ("I think the first one") is a label we cannot trust. Whitespace,
    punctuation and markdown around the letter are ignored, and "Image A" / "image b" are accepted.
    """
    words = re.sub(r"[\W_]+", " ", content).strip().lower()
    match = re.fullmatch(r"(?:image )?([ab])", words)
    if match is None:
        return None
    return 0 if match.group(1) == "a" else 1


def preference_messages(image_a: np.ndarray, image_b: np.ndarray, task: str) -> list[dict]:
    """The chat messages asking which of two RGB uint8 images (H, W, 3) is closer to completing `task`."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": PREFERENCE_PROMPT.format(task=task)},
                {"type": "text", "text": "Image A:"},
                {"type": "image_url", "image_url": {"url": encode_png_data_url(image_a)}},
                {"type": "text", "text": "Image B:"},
                {"type": "image_url", "image_url": {"url": encode_png_data_url(image_b)}},
            ],
        }
    ]


def cache_key(model: str, messages: list[dict], temperature: float, max_tokens: int, seed: int | None) -> str:
    """sha256 (hex) of a canonical JSON of the question; each base64 data URL enters as the sha256 of its bytes."""
    question = {
        "model": model,
        "messages": _hash_data_urls(messages),
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "seed": seed,
    }
    canonical = json.dumps(question, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _hash_data_urls(value):
    if isinstance(value, dict):
        return {key: _hash_data_urls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hash_data_urls(item) for item in value]
    if isinstance(value, str) and value.startswith("data:"):
        header, sep, payload = value.partition(",")
        if sep and header.endswith(";base64"):
            try:
                return "sha256:" + hashlib.sha256(base64.b64decode(payload, validate=True)).hexdigest()
            except ValueError:
                return value
    return value


class _RetriableError(Exception):
    """An attempt failed in a way a later attempt may not (network, timeout, 408/429/5xx, a bad body)."""


class _FatalError(Exception):
    """An attempt failed in a way retrying cannot fix (a 4xx such as a wrong model or key)."""


class ChatClient:
    """Thread-safe chat-completions client: one `complete` per question, many in parallel, none raising.

    Answers are cached on disk when `cfg.cache_dir` is set. A preference answer is cached only if it
    parses, so a malformed answer is asked again next time rather than kept; `complete` and
    `complete_text` cache every answer the server gives.
    """

    def __init__(self, cfg: ChatClientCfg):
        cfg.validate()
        self.cfg = cfg
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        self.last_error: str | None = None
        """Why the last failed attempt failed (for logs and error messages), or None."""
        self._semaphore = threading.BoundedSemaphore(cfg.max_concurrency)
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(("requests", "cache_hits", "retries", "failures", "malformed", "answered"), 0)
        # A proxy from the environment must not swallow requests to a server on this machine.
        host = urllib.parse.urlsplit(self.url).hostname or ""
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK_HOSTS else []
        self._opener = urllib.request.build_opener(*handlers)
        if cfg.cache_dir is not None:
            os.makedirs(cfg.cache_dir, exist_ok=True)

    # Properties.

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the counters.

        requests: HTTP attempts made; cache_hits: questions answered from the cache; retries: attempts
        after a first one; failures: questions left without an answer (every attempt failed, or a
        non-retried 4xx); malformed: answers that came back but did not parse (preferences); answered:
        questions the server answered (whether or not the answer parses).
        """
        with self._lock:
            return dict(self._stats)

    # Public API.

    def complete(
        self, messages: list[dict], *, temperature: float | None = None, seed: int | None = None
    ) -> str | None:
        """The assistant's content for `messages` (OpenAI format, images as content parts), or None on failure.

        Args:
            messages: chat messages, e.g. [{"role": "user", "content": "..."}].
            temperature: sampling temperature; None uses cfg.temperature.
            seed: passed to the server and part of the cache key, so K samples of one question differ by seed.
        """
        return self._complete(messages, temperature, seed, accept=None)

    def complete_text(self, prompt: str, system: str | None = None, seed: int | None = None) -> str | None:
        """The answer to a text-only prompt, with an optional system message, or None on failure."""
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages.append({"role": "user", "content": prompt})
        return self.complete(messages, seed=seed)

    def ask_preference(
        self, image_a: np.ndarray, image_b: np.ndarray, task: str, *, seed: int | None = None
    ) -> int | None:
        """0 if the model says image A is closer to completing `task`, 1 for image B, None if it gave no usable answer.

        Args:
            image_a: RGB uint8 image (H, W, 3).
            image_b: RGB uint8 image (H, W, 3).
            task: the task in words, e.g. "lift the red box above the table".
            seed: sampling seed (see `complete`).
        """
        content = self._complete(preference_messages(image_a, image_b, task), None, seed, accept=_parses_as_preference)
        if content is None:
            return None
        label = parse_preference(content)
        if label is None:
            self._count("malformed")
            log.warning("unparsable preference answer %r", content[:200])
        return label

    def ask_preferences(
        self, pairs: list[tuple[np.ndarray, np.ndarray]], task: str, *, seed: int | None = None
    ) -> list[int | None]:
        """`ask_preference` for each (image_a, image_b) pair, max_concurrency at a time; results in pair order."""
        if not pairs:
            return []
        with ThreadPoolExecutor(max_workers=self.cfg.max_concurrency, thread_name_prefix="chat") as pool:
            return list(pool.map(lambda pair: self.ask_preference(pair[0], pair[1], task, seed=seed), pairs))

    # Private methods.

    def _complete(
        self, messages: list[dict], temperature: float | None, seed: int | None, accept: Callable[[str], bool] | None
    ) -> str | None:
        temperature = self.cfg.temperature if temperature is None else temperature
        path = None
        if self.cfg.cache_dir is not None:
            key = cache_key(self.cfg.model, messages, temperature, self.cfg.max_tokens, seed)
            path = os.path.join(self.cfg.cache_dir, key + ".json")
            cached = _read_cache(path)
            if cached is not None:
                self._count("cache_hits")
                return cached
        body = {"model": self.cfg.model, "messages": messages, "temperature": temperature}
        body["max_tokens"] = self.cfg.max_tokens
        if seed is not None:
            body["seed"] = seed
        content = self._post_with_retries(json.dumps(body).encode("utf-8"))
        if content is not None and path is not None and (accept is None or accept(content)):
            _write_cache(path, content)
        return content

    def _post_with_retries(self, data: bytes) -> str | None:
        for attempt in range(self.cfg.max_retries + 1):
            if attempt > 0:
                self._count("retries")
                delay_s = self.cfg.backoff_s * 2 ** (attempt - 1)
                time.sleep(delay_s * (1.0 + 0.1 * random.random()))
            try:
                content = self._post_once(data)
            except _RetriableError as error:
                self.last_error = str(error)
                continue
            except _FatalError as error:
                self.last_error = str(error)
                break
            self._count("answered")
            return content
        self._count("failures")
        log.warning("chat request to %s failed: %s", self.url, self.last_error)
        return None

    def _post_once(self, data: bytes) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.cfg.api_key:
            headers["Authorization"] = f"Bearer {self.cfg.api_key}"
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        with self._semaphore:
            self._count("requests")
            try:
                with self._opener.open(request, timeout=self.cfg.timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as error:
                detail = _error_detail(error)
                error.close()
                message = f"HTTP {error.code}: {detail}"
                if error.code in _RETRIED_STATUS or error.code >= 500:
                    raise _RetriableError(message) from None
                raise _FatalError(message) from None
            except (OSError, http.client.HTTPException) as error:
                # URLError (refused, DNS), TimeoutError, resets and bad status lines all land here.
                raise _RetriableError(f"{type(error).__name__}: {error}") from None
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _RetriableError(f"not a chat completion: {raw[:120]!r}") from None
        if not isinstance(content, str):
            raise _RetriableError(f"the answer has no text content: {raw[:120]!r}")
        return content

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1


def _parses_as_preference(content: str) -> bool:
    return parse_preference(content) is not None


def _error_detail(error: urllib.error.HTTPError) -> str:
    """The message of an OpenAI-style error body, else the start of the body."""
    try:
        raw = error.read()
    except (OSError, http.client.HTTPException):
        return error.reason or ""
    try:
        return str(json.loads(raw)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return raw[:200].decode("utf-8", "replace")


def _read_cache(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as file:
            content = json.load(file)["content"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _write_cache(path: str, content: str) -> None:
    """Write atomically so a concurrent reader never sees half a file; a failure is a warning, not an error."""
    try:
        atomic_write_text(path, json.dumps({"content": content}, ensure_ascii=False))
    except OSError as error:
        log.warning("could not write the chat cache file %s: %s", path, error)
