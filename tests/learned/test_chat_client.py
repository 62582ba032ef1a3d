# SPDX-License-Identifier: BSD-3-Clause
"""The chat client against the stand-in server over real HTTP on loopback: answers, faults, cache, limits."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from batonlab.learned.chat_client import (
    ChatClient,
    ChatClientCfg,
    cache_key,
    decode_png_data_url,
    encode_png_data_url,
    parse_preference,
    preference_messages,
)
from batonlab.learned.stand_in_server import MALFORMED_ANSWER, StandInServer

TASK = "brighten the scene"


def grey(level: int, size: int = 8) -> np.ndarray:
    """An RGB frame filled with one grey level: the level is the "progress" the oracle judges."""
    return np.full((size, size, 3), level, dtype=np.uint8)


def brighter_oracle(image_a: np.ndarray, image_b: np.ndarray, text: str) -> str:
    assert TASK in text and "Image A:" in text and "Image B:" in text
    return "A" if image_a.mean() > image_b.mean() else "B"


def echo_oracle(messages: list[dict], body: dict) -> str:
    return f"echo {messages[-1]['content']} seed={body.get('seed')}"


@pytest.fixture
def server():
    with StandInServer(preference_oracle=brighter_oracle, text_oracle=echo_oracle) as running:
        yield running


def make_client(server: StandInServer, **overrides) -> ChatClient:
    fields = {"base_url": server.base_url, "model": server.model, "backoff_s": 0.01, "timeout_s": 5.0}
    fields.update(overrides)
    return ChatClient(ChatClientCfg(**fields))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Formats.


def test_png_data_url_round_trip_and_strict_preference_parsing():
    image = np.random.default_rng(0).integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    url = encode_png_data_url(image)
    assert url.startswith("data:image/png;base64,")
    np.testing.assert_array_equal(decode_png_data_url(url), image)
    for answer, label in [("A", 0), (" b\n", 1), ("**A**", 0), ("Image B.", 1), ("image a", 0), ("`B`", 1)]:
        assert parse_preference(answer) == label, answer
    for answer in ["", "AB", "A or B", "Answer: A", MALFORMED_ANSWER, "Image C", "C"]:
        assert parse_preference(answer) is None, answer


def test_cache_key_follows_image_bytes_and_seed():
    question = preference_messages(grey(10), grey(20), TASK)
    key = cache_key("m", question, 0.0, 16, None)
    assert key == cache_key("m", preference_messages(grey(10), grey(20), TASK), 0.0, 16, None)
    assert key != cache_key("m", preference_messages(grey(10), grey(21), TASK), 0.0, 16, None)
    assert key != cache_key("m", question, 0.0, 16, 1)
    assert key != cache_key("other", question, 0.0, 16, None)


# Answers.


def test_preference_round_trip_follows_brightness(server):
    client = make_client(server)
    assert client.ask_preference(grey(200), grey(50), TASK) == 0
    assert client.ask_preference(grey(50), grey(200), TASK) == 1
    body = server.last_request
    assert body["model"] == server.model and body["temperature"] == 0.0 and "seed" not in body
    parts = body["messages"][0]["content"]
    assert [part["type"] for part in parts] == ["text", "text", "image_url", "text", "image_url"]
    np.testing.assert_array_equal(decode_png_data_url(parts[4]["image_url"]["url"]), grey(200))

    levels = [(10, 90), (250, 5), (128, 127), (3, 4), (77, 33), (0, 255)]
    labels = client.ask_preferences([(grey(a), grey(b)) for a, b in levels], TASK)
    assert labels == [0 if a > b else 1 for a, b in levels]
    assert client.stats["answered"] == 2 + len(levels) and client.stats["failures"] == 0


def test_text_completion_sends_system_seed_and_bearer_key(server):
    client = make_client(server, api_key="sk-local")
    assert client.complete_text("hello", system="be brief", seed=7) == "echo hello seed=7"
    assert server.last_headers["authorization"] == "Bearer sk-local"
    assert server.last_request["seed"] == 7
    assert [message["role"] for message in server.last_request["messages"]] == ["system", "user"]
    make_client(server).complete_text("no key")
    assert "authorization" not in server.last_headers


# Faults.


def test_server_errors_are_retried(server):
    client = make_client(server)
    server.fail_next(2, status=503)
    assert client.ask_preference(grey(9), grey(1), TASK) == 0
    assert server.requests == 3
    assert client.stats["retries"] == 2 and client.stats["requests"] == 3 and client.stats["failures"] == 0
    server.fail_next(1, status=429)
    assert client.complete_text("again") == "echo again seed=None"


def test_client_errors_are_not_retried(server):
    client = make_client(server, model="no-such-model")
    assert client.complete_text("hi") is None
    assert server.requests == 1
    assert client.stats["failures"] == 1 and client.stats["retries"] == 0
    assert "404" in client.last_error and "no-such-model" in client.last_error


def test_timeouts_are_retried_then_given_up(server):
    client = make_client(server, timeout_s=0.3, max_retries=1)
    server.delay_next(1, 1.0)
    assert client.ask_preference(grey(1), grey(2), TASK) == 1
    assert client.stats["retries"] == 1 and client.stats["failures"] == 0

    server.delay_next(2, 1.0)
    assert client.ask_preference(grey(1), grey(2), TASK) is None
    assert client.stats["failures"] == 1 and client.stats["requests"] == 4


def test_server_down_gives_none():
    cfg = ChatClientCfg(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", max_retries=2, backoff_s=0.01)
    client = ChatClient(cfg)
    assert client.complete_text("anyone there?") is None
    assert client.ask_preferences([(grey(1), grey(2))], TASK) == [None]
    assert client.stats["failures"] == 2 and client.stats["requests"] == 6 and client.stats["answered"] == 0


def test_malformed_and_garbage_answers_give_none(server):
    client = make_client(server, max_retries=1)
    server.malformed_next(1)
    assert client.ask_preference(grey(5), grey(6), TASK) is None
    assert client.stats["malformed"] == 1 and client.stats["retries"] == 0 and server.requests == 1

    server.garbage_next(1)  # a body that is not JSON is a server hiccup: retried
    assert client.ask_preference(grey(5), grey(6), TASK) == 1
    server.garbage_next(2)
    assert client.ask_preference(grey(5), grey(6), TASK) is None
    assert client.stats["failures"] == 1 and client.stats["malformed"] == 1


# Cache.


def test_cache_answers_repeats_without_requests(server, tmp_path):
    client = make_client(server, cache_dir=str(tmp_path))
    assert client.ask_preference(grey(40), grey(30), TASK) == 0
    assert client.ask_preference(grey(40), grey(30), TASK) == 0
    assert server.requests == 1 and client.stats["cache_hits"] == 1
    assert client.ask_preference(grey(30), grey(40), TASK) == 1  # other images, other question
    assert client.ask_preference(grey(40), grey(30), TASK, seed=1) == 0
    assert server.requests == 3

    assert client.complete_text("note", seed=1) == "echo note seed=1"
    assert client.complete_text("note", seed=2) == "echo note seed=2"
    assert server.requests == 5
    cached = sorted(tmp_path.glob("*.json"))
    assert len(cached) == 5 and all("content" in json.loads(path.read_text()) for path in cached)

    fresh = make_client(server, cache_dir=str(tmp_path))
    assert fresh.complete_text("note", seed=2) == "echo note seed=2"
    assert fresh.ask_preference(grey(40), grey(30), TASK) == 0
    assert server.requests == 5 and fresh.stats["cache_hits"] == 2 and fresh.stats["requests"] == 0


def test_malformed_preference_is_not_cached(server, tmp_path):
    client = make_client(server, cache_dir=str(tmp_path))
    server.malformed_next(1)
    assert client.ask_preference(grey(1), grey(99), TASK) is None
    assert client.ask_preference(grey(1), grey(99), TASK) == 1
    assert server.requests == 2 and client.stats["cache_hits"] == 0


# Limits and configuration.


def test_concurrency_limit_holds():
    with StandInServer(preference_oracle=brighter_oracle, delay_s=0.2) as server:
        client = make_client(server, max_concurrency=2)
        levels = [(i * 20, 100) for i in range(8)]
        labels = client.ask_preferences([(grey(a), grey(b)) for a, b in levels], TASK)
        assert labels == [0 if a > b else 1 for a, b in levels]
        assert server.max_in_flight == 2

    # The limit holds for callers' own threads too, not only for ask_preferences' pool.
    with StandInServer(text_oracle=echo_oracle, delay_s=0.2) as server:
        client = make_client(server, max_concurrency=2)
        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(client.complete_text, [f"q{i}" for i in range(6)]))
        assert answers == [f"echo q{i} seed=None" for i in range(6)]
        assert server.max_in_flight == 2


def test_stand_in_serves_models_and_refuses_unknown_kinds(server):
    from urllib.request import urlopen

    with urlopen(server.base_url + "/models", timeout=5) as response:
        listing = json.loads(response.read())
    assert [model["id"] for model in listing["data"]] == [server.model]
    with StandInServer(text_oracle=echo_oracle) as text_only:
        client = make_client(text_only, max_retries=0)
        assert client.ask_preference(grey(1), grey(2), TASK) is None
        assert "400" in client.last_error and "preference oracle" in client.last_error


def test_from_env_reads_variables_and_names_what_is_missing(monkeypatch):
    for name in ["BATONLAB_LLM_BASE_URL", "BATONLAB_LLM_MODEL", "BATONLAB_LLM_API_KEY", "OPENAI_API_KEY"]:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="base_url.*BATONLAB_LLM_BASE_URL.*model.*BATONLAB_LLM_MODEL"):
        ChatClientCfg.from_env()
    with pytest.raises(ValueError, match="BATONLAB_LLM_BASE_URL"):
        ChatClient(ChatClientCfg(model="llava"))

    monkeypatch.setenv("BATONLAB_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("BATONLAB_LLM_MODEL", "llava")
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    cfg = ChatClientCfg.from_env(timeout_s=5.0)
    expected = ("http://127.0.0.1:11434/v1", "llava", "from-openai", 5.0)
    assert (cfg.base_url, cfg.model, cfg.api_key, cfg.timeout_s) == expected
    monkeypatch.setenv("BATONLAB_LLM_API_KEY", "from-batonlab")
    cfg = ChatClientCfg.from_env(model="qwen", base_url=None)
    assert (cfg.base_url, cfg.model, cfg.api_key) == ("http://127.0.0.1:11434/v1", "qwen", "from-batonlab")
    with pytest.raises(ValueError, match="no field"):
        ChatClientCfg.from_env(modle="typo")
