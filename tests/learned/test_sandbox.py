# SPDX-License-Identifier: BSD-3-Clause
"""The sandbox for LLM-written functions: static rejections, run-time limits, result checks, restarts."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest
import torch
from batonlab.learned.sandbox import (
    SandboxedFunction,
    SandboxError,
    SandboxMemoryError,
    SandboxRuntimeError,
    SandboxTimeout,
    _make_namespace,
    check_source,
    namespace_summary,
    validate,
)

PROGRESS = '''
RADIUS = 0.5


def distance(a, b):
    return T.norm(a - b, dim=-1)


def progress(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Annotations name torch, which is not in scope: the sandbox drops them."""
    d = distance(obs["ee_pos"], obs["ee_target"])
    return T.clamp(1.0 - d / RADIUS, 0.0, 1.0)
'''

# One child serves every run-time misbehaviour, picked by obs["mode"], so the file spawns few processes.
MISBEHAVING = '''
def progress(obs):
    mode = int(obs["mode"][0, 0].item())
    d = T.norm(obs["ee_pos"], dim=-1)
    if mode == 1:
        while True:
            pass
    if mode == 2:
        x = [0]
        while True:
            x = x + x
    if mode == 3:
        y = obs["ee_pos"]
        while True:
            y = T.cat([y, y])
    if mode == 4:
        return [0] * 10**10
    if mode == 5:
        return T.sqrt(d - 1.0)
    if mode == 6:
        return obs["ee_pos"]
    if mode == 7:
        return obs["ee_velocity"]
    if mode == 8:
        return d.sum() / 0
    if mode == 9:
        return 1 / 0
    if mode == 10:
        return d > 0
    if mode == 11:
        return 0.5
    if mode == 12:
        return d.unsqueeze(-1)
    return d
'''

REWARD = '''
def compute_reward(obs):
    d = T.norm(obs["ee_pos"] - obs["ee_target"], dim=-1)
    components = {"reach": T.exp(-d / 0.1), "effort": -0.01 * T.sum(T.square(obs["joint_vel"]), dim=-1)}
    if obs["joint_vel"][0, 0] > 100.0:
        components["broken"] = T.log(-d)
    return components
'''


def line_of(source: str, text: str) -> int:
    """1-based line number of the first line of ``source`` containing ``text``."""
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def make_obs(num_envs: int = 16, mode: int = 0, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "ee_pos": torch.rand(num_envs, 3, generator=generator) * 0.6,
        "ee_target": torch.rand(num_envs, 3, generator=generator) * 0.6,
        "joint_vel": torch.randn(num_envs, 6, generator=generator),
        "mode": torch.full((num_envs, 1), float(mode)),
    }


def body(code: str) -> str:
    """A progress function whose body is ``code``."""
    return "def progress(obs):\n" + textwrap.indent(textwrap.dedent(code).strip(), "    ") + "\n"


@pytest.fixture(scope="module")
def progress_fn():
    with SandboxedFunction(PROGRESS, "progress") as fn:
        yield fn


@pytest.fixture(scope="module")
def misbehaving_fn():
    with SandboxedFunction(MISBEHAVING, "progress", time_limit_s=2.0, memory_limit_mb=128) as fn:
        yield fn


# Static rejections: nothing of these runs, no process starts.

REJECTED = [
    (body("import os\nreturn obs['x']"), "line 2 imports 'os' (imports are not allowed)"),
    ("from pathlib import Path\n" + body("return obs['x']"), "line 1 imports 'pathlib'"),
    (body("os = __import__('os')\nreturn obs['x']"), "line 2 uses the name '__import__'"),
    (body("open('/etc/passwd').read()\nreturn obs['x']"), "line 2 uses the builtin 'open'"),
    (body("return ().__class__.__bases__[0].__subclasses__()"), "line 2 reads the private attribute '.__"),
    (body("return obs.__class__"), "line 2 reads the private attribute '.__class__'"),
    (body("return obs['x']._values"), "private attribute '._values'"),
    (body("return getattr(obs, 'x')"), "uses the builtin 'getattr'"),
    (body("return eval('obs')"), "uses the builtin 'eval'"),
    (body("exec('y = 1')\nreturn obs['x']"), "uses the builtin 'exec'"),
    (body("T.load('weights.pt')\nreturn obs['x']"), "line 2 reads the attribute '.load', which is not in the allowed"),
    (body("torch.save(obs, 'obs.pt')\nreturn obs['x']"), "line 2 uses the undefined name 'torch'"),
    (body("return obs['x'].to('cuda')"), "reads the attribute '.to'"),
    (body("return obs['x'].numpy()"), "reads the attribute '.numpy'"),
    (body("return '{0.__class__}'.format(obs)"), "string constant containing '__'"),
    (body("return f'{obs.__class__}'"), "private attribute '.__class__'"),
    (body("class A:\n    pass\nreturn obs['x']"), "line 2 defines a class"),
    (body("with obs as o:\n    pass\nreturn obs['x']"), "line 2 uses 'with'"),
    (body("try:\n    return obs['x']\nexcept KeyError:\n    return obs['y']"), "line 2 uses 'try'"),
    (body("raise ValueError('no')"), "line 2 uses 'raise'"),
    ("y = 0\n" + body("global y\nreturn obs['x']"), "line 3 uses 'global'"),
    (body("yield obs['x']"), "uses 'yield'"),
    ("def deco(f):\n    return f\n@deco\n" + body("return obs['x']"), "decorates 'progress'"),
    ("print('hello')\n" + body("return obs['x']"), "line 1 uses the builtin 'print'"),
    ("ZEROS = T.zeros_like\n" + body("return obs['x']"), "line 1 assigns something other than a constant"),
    ("for i in range(3):\n    pass\n" + body("return obs['x']"), "line 1 has a top-level statement"),
    ("def progress(obs, extra):\n    return obs['x']\n", "'progress' must take exactly one positional parameter"),
    ("def progress(*obs):\n    return obs[0]\n", "'progress' must take exactly one positional parameter"),
    ("def reward(obs):\n    return obs['x']\n", "no top-level function 'progress' (defined functions: reward)"),
    ("def progress(obs):\n    return obs[\n", "syntax error at line"),
]


@pytest.mark.parametrize(("source", "message"), REJECTED, ids=[m.split(" (")[0][:40] for _, m in REJECTED])
def test_static_rejection(source: str, message: str):
    with pytest.raises(SandboxError) as info:
        check_source(source, "progress")
    assert type(info.value) is SandboxError
    assert str(info.value).startswith("generated code rejected: ")
    assert message in str(info.value)


def test_construction_rejects_statically_without_a_process():
    started = time.perf_counter()
    with pytest.raises(SandboxError, match="imports 'subprocess'"):
        SandboxedFunction(body("import subprocess\nreturn obs['x']"), "progress")
    with pytest.raises(ValueError, match="returns must be"):
        SandboxedFunction(PROGRESS, "progress", returns="scalar")
    print(f"static rejection at construction: {1e3 * (time.perf_counter() - started):.1f} ms")


def test_torch_may_import_itself_but_nothing_else():
    """torch's C++ code imports `torch` through the caller's builtins; that import is the only one left open."""
    library_import = _make_namespace()["__builtins__"]["__import__"]
    assert library_import("torch") is torch
    with pytest.raises(ImportError, match="imports are not allowed in generated code"):
        library_import("os")


def test_allowed_constructs_pass_the_check():
    source = '''
"""Module docstring."""
SCALE = -math.pi / 2
WEIGHTS = (0.5, 0.25)


def progress(obs):
    parts = [T.tanh(obs[key].sum(dim=-1)) for key in ("a", "b")]
    best = T.stack(parts, dim=-1).max(dim=-1).values
    total = sum(w * p for w, p in zip(WEIGHTS, parts))
    scaled = (lambda x: x * SCALE)(total)
    _unused = {name: len(value.shape) for name, value in obs.items()}
    return T.where(best > 0, scaled, best) if len(parts) == 2 else best
'''
    check_source(source, "progress")
    assert "T (torch functions): abs" in namespace_summary()


# Valid functions.


def test_progress_values_match_torch(progress_fn: SandboxedFunction):
    obs = make_obs()
    expected = torch.clamp(1.0 - torch.linalg.vector_norm(obs["ee_pos"] - obs["ee_target"], dim=-1) / 0.5, 0.0, 1.0)
    result = progress_fn(obs)
    assert result.shape == (16,) and result.dtype == torch.float32
    assert torch.equal(result, expected)
    assert 0.0 < result.max() <= 1.0 and result.min() >= 0.0
    validate(progress_fn, make_obs(num_envs=3, seed=1))


def test_per_call_overhead(progress_fn: SandboxedFunction):
    """Printed, not asserted: ~512 envs x ~40 floats each env step."""
    obs = make_obs(num_envs=512)
    obs.update({f"extra_{index}": torch.randn(512, 7) for index in range(4)})
    assert sum(value.shape[1] for value in obs.values()) == 41
    progress_fn(obs)
    calls = 200
    started = time.perf_counter()
    for _ in range(calls):
        progress_fn(obs)
    sandboxed_ms = 1e3 * (time.perf_counter() - started) / calls
    started = time.perf_counter()
    for _ in range(calls):
        torch.clamp(1.0 - torch.linalg.vector_norm(obs["ee_pos"] - obs["ee_target"], dim=-1) / 0.5, 0.0, 1.0)
    direct_ms = 1e3 * (time.perf_counter() - started) / calls
    print(f"sandboxed call: {sandboxed_ms:.3f} ms, in-process: {direct_ms:.3f} ms (512 envs x 41 floats)")


def test_components_reward():
    obs = make_obs(num_envs=8)
    with SandboxedFunction(REWARD, "compute_reward", returns="components") as fn:
        components = fn(obs)
        assert set(components) == {"reach", "effort"}
        d = torch.linalg.vector_norm(obs["ee_pos"] - obs["ee_target"], dim=-1)
        torch.testing.assert_close(components["reach"], torch.exp(-d / 0.1))
        torch.testing.assert_close(components["effort"], -0.01 * obs["joint_vel"].square().sum(dim=-1))
        obs["joint_vel"][0, 0] = 1000.0
        with pytest.raises(SandboxRuntimeError, match=r"component 'broken' is not finite in 8 of 8 envs"):
            fn(obs)
        assert fn.restarts == 0


def test_tensor_mode_rejects_a_dict():
    with SandboxedFunction(REWARD, "compute_reward", returns="tensor") as fn:
        with pytest.raises(SandboxRuntimeError, match=r"the result is a dict, expected a tensor of shape \(4,\)"):
            fn(make_obs(num_envs=4))


def test_failing_definition_is_reported_at_construction():
    failed = r"defining the generated code failed: .* ZeroDivisionError at line 1"
    with pytest.raises(SandboxRuntimeError, match=failed):
        SandboxedFunction("SCALE = 1 / 0\n" + body("return obs['x'] * SCALE"), "progress")


# Run-time limits and result checks, all in one child.


@pytest.mark.parametrize(("mode", "error", "message"), [
    (2, SandboxMemoryError, "exceeded its memory limit of 128 MiB"),
    (3, SandboxMemoryError, "exceeded its memory limit of 128 MiB"),
    (4, SandboxMemoryError, "exceeded its memory limit of 128 MiB"),
    (5, SandboxRuntimeError, "the result is not finite in"),
    (6, SandboxRuntimeError, "the result has shape (16, 3), expected (16,)"),
    (7, SandboxRuntimeError, f"raised KeyError at line {line_of(MISBEHAVING, 'ee_velocity')} (in progress): \"'ee_"
                             "velocity' is not an observation field (available: ee_pos, ee_target, joint_vel, mode)\""),
    (8, SandboxRuntimeError, "the result has shape (), expected (16,)"),
    (9, SandboxRuntimeError, f"raised ZeroDivisionError at line {line_of(MISBEHAVING, '1 / 0')} (in progress): "
                             "division by zero"),
    (10, SandboxRuntimeError, "the result has dtype bool, expected a floating dtype"),
    (11, SandboxRuntimeError, "the result is a float, expected a tensor"),
], ids=["list-doubling", "tensor-doubling", "huge-list", "nan", "wrong-shape", "missing-field", "scalar",
        "exception", "bool", "float"])
def test_misbehaviour_is_reported(misbehaving_fn: SandboxedFunction, mode: int, error: type, message: str):
    with pytest.raises(error) as info:
        misbehaving_fn(make_obs(mode=mode))
    assert type(info.value) is error
    assert message in str(info.value)
    # The child survives an exception inside the function and serves the next call.
    assert misbehaving_fn.alive
    torch.testing.assert_close(misbehaving_fn(make_obs()), make_obs()["ee_pos"].norm(dim=-1))


def test_column_result_is_squeezed(misbehaving_fn: SandboxedFunction):
    assert misbehaving_fn(make_obs(mode=12)).shape == (16,)


def test_endless_loop_times_out_then_restarts(misbehaving_fn: SandboxedFunction):
    restarts = misbehaving_fn.restarts
    started = time.perf_counter()
    with pytest.raises(SandboxTimeout, match=r"'progress' exceeded its time limit of 2 s \(an endless loop\?\)"):
        misbehaving_fn(make_obs(mode=1))
    print(f"timeout raised after {time.perf_counter() - started:.2f} s")
    assert not misbehaving_fn.alive
    torch.testing.assert_close(misbehaving_fn(make_obs()), make_obs()["ee_pos"].norm(dim=-1))
    assert misbehaving_fn.restarts == restarts + 1 and misbehaving_fn.alive


def test_killed_child_is_reported_then_restarts(misbehaving_fn: SandboxedFunction):
    misbehaving_fn(make_obs())
    restarts = misbehaving_fn.restarts
    os.kill(misbehaving_fn._child.process.pid, signal.SIGKILL)
    misbehaving_fn._child.process.join()
    with pytest.raises(SandboxError, match=r"the sandbox process for 'progress' died during a call \(signal SIGKILL\)"):
        misbehaving_fn(make_obs())
    torch.testing.assert_close(misbehaving_fn(make_obs()), make_obs()["ee_pos"].norm(dim=-1))
    assert misbehaving_fn.restarts == restarts + 1


def test_close_stops_the_child():
    fn = SandboxedFunction(body("return obs['mode'][:, 0]"), "progress")
    process = fn._child.process
    assert fn(make_obs(num_envs=2, mode=3)).tolist() == [3.0, 3.0]
    fn.close()
    fn.close()
    assert not process.is_alive() and not fn.alive
    with pytest.raises(SandboxError, match="'progress' was closed"):
        fn(make_obs(num_envs=2))
