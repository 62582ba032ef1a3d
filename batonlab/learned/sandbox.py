# SPDX-License-Identifier: BSD-3-Clause
"""Run LLM-written progress and reward functions in a child process with a restricted namespace.

Design and contract notes: docs/modules/batonlab.learned.sandbox.md.
"""

from __future__ import annotations

import ast
import builtins
import math
import multiprocessing
import multiprocessing.connection
import resource
import signal
import time
import traceback
import types
from dataclasses import dataclass

import numpy as np
import torch

# The namespace the generated code sees.

TORCH_FUNCTIONS: dict[str, object] = {
    **{name: getattr(torch, name)
       for name in ("abs", "acos", "amax", "amin", "asin", "atan", "atan2", "cat", "clamp", "clip", "cos", "exp",
                    "full_like", "log", "max", "maximum", "mean", "min", "minimum", "ones_like", "pow", "sigmoid",
                    "sign", "sin", "sqrt", "square", "stack", "sum", "tanh", "where", "zeros_like")},
    "norm": torch.linalg.vector_norm,
    "cross": torch.linalg.cross,
    "pi": math.pi,
}
"""What ``T.<name>`` means in generated code; ``T.norm`` is ``torch.linalg.vector_norm`` (takes ``dim=``)."""

MATH_FUNCTIONS: dict[str, object] = {
    name: getattr(math, name)
    for name in ("pi", "e", "tau", "inf", "sqrt", "exp", "log", "tanh", "cos", "sin", "tan", "atan2", "acos", "asin",
                 "atan", "hypot", "fabs", "floor", "ceil")
}
"""What ``math.<name>`` means in generated code."""

SAFE_BUILTINS: dict[str, object] = {
    name: getattr(builtins, name)
    for name in ("abs", "min", "max", "float", "int", "len", "range", "sum", "round", "bool", "dict", "list",
                 "tuple", "zip", "enumerate", "True", "False", "None")
}
"""The only builtins generated code can name."""

TENSOR_ATTRIBUTES = frozenset({
    # Shape.
    "shape", "ndim", "dim", "size", "numel",
    # Reductions; max/min with dim= return (values, indices).
    "sum", "mean", "prod", "std", "var", "norm", "max", "min", "amax", "amin", "argmax", "argmin", "any", "all",
    "values", "indices", "cumsum",
    # Element-wise.
    "clamp", "clip", "clamp_min", "clamp_max", "abs", "sqrt", "exp", "log", "tanh", "sigmoid", "sin", "cos",
    "square", "sign", "pow", "neg", "float", "masked_fill",
    # Views and copies.
    "unsqueeze", "squeeze", "view", "reshape", "flatten", "expand", "expand_as", "transpose", "clone", "detach",
    "item", "tolist",
    # dict (obs, components) and list.
    "keys", "items", "get", "append",
})
"""Attributes generated code may read on tensors, dicts and lists (`.to`, `.numpy`, `.data`, `.storage` are not)."""

ALLOWED_ATTRIBUTES = TENSOR_ATTRIBUTES | TORCH_FUNCTIONS.keys() | MATH_FUNCTIONS.keys()
"""Every attribute name the static check accepts, whatever object it is read on."""

FORBIDDEN_BUILTINS = frozenset({
    "open", "exec", "eval", "compile", "getattr", "setattr", "delattr", "hasattr", "globals", "locals", "vars",
    "__import__", "input", "print", "breakpoint", "memoryview", "type", "object", "super", "help", "dir",
    "classmethod", "staticmethod", "property", "exit", "quit",
})
"""Builtins named in a rejection message of their own (none of them exists in the namespace either)."""

MAX_SOURCE_CHARS = 100_000
"""Longest generated source accepted [characters]."""

_ALLOWED_NODES = (
    ast.Module, ast.FunctionDef, ast.Return, ast.Assign, ast.AugAssign, ast.For, ast.While, ast.If, ast.Expr,
    ast.Pass, ast.Break, ast.Continue, ast.Assert, ast.Delete,
    ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set, ast.ListComp,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Compare, ast.Call, ast.Constant, ast.Attribute,
    ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice, ast.JoinedStr, ast.FormattedValue,
    ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop, ast.comprehension, ast.arguments,
    ast.arg, ast.keyword,
)
_NODE_WORDS = {
    ast.Import: "imports", ast.ImportFrom: "imports", ast.ClassDef: "defines a class", ast.With: "uses 'with'",
    ast.Try: "uses 'try'", ast.Raise: "uses 'raise'", ast.Global: "uses 'global'", ast.Nonlocal: "uses 'nonlocal'",
    ast.Yield: "uses 'yield'", ast.YieldFrom: "uses 'yield from'", ast.Match: "uses 'match'",
    ast.AsyncFunctionDef: "defines an async function", ast.Await: "uses 'await'",
}
_CONSTANT_NODES = (ast.Constant, ast.Tuple, ast.UnaryOp, ast.BinOp, ast.Name, ast.Attribute, ast.Load,
                   ast.operator, ast.unaryop)
_REJECTED = "generated code rejected"


def namespace_summary() -> str:
    """The names generated code may use, as one text block for a prompt."""
    callables = ", ".join(name for name in SAFE_BUILTINS if name not in ("True", "False", "None"))
    return (f"T (torch functions): {', '.join(sorted(TORCH_FUNCTIONS))}; T.norm is torch.linalg.vector_norm.\n"
            f"math: {', '.join(MATH_FUNCTIONS)}.\n"
            f"builtins: {callables}.\n"
            f"tensor/dict attributes: {', '.join(sorted(TENSOR_ATTRIBUTES))}.\n"
            "No imports, no classes, no try/with/raise, no names starting with '__', no attributes starting with '_'.")


# Errors.


class SandboxError(ValueError):
    """Generated code was rejected, or failed when it ran; the message says what and where."""


class SandboxTimeout(SandboxError):
    """A call exceeded its wall-clock limit; the child process was killed."""


class SandboxMemoryError(SandboxError):
    """A call exceeded the child's address-space limit."""


class SandboxRuntimeError(SandboxError):
    """The generated function raised, or returned something other than finite (num_envs,) float tensors."""


# Static checks.


def check_source(source: str, entry: str) -> None:
    """Reject generated source that breaks a rule of the sandbox, before anything of it runs.

    Args:
        source: Python source that defines the function ``entry``.
        entry: the name of the function the caller will call with the observation dict.

    Raises:
        SandboxError: "generated code rejected: line N ..." naming the first broken rule.
    """
    _checked_tree(source, entry)


def _checked_tree(source: str, entry: str) -> ast.Module:
    """Parse, check and strip annotations; the tree the child compiles."""
    if not isinstance(source, str):
        raise SandboxError(f"{_REJECTED}: expected source text, got {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise SandboxError(f"{_REJECTED}: source has {len(source)} characters, the limit is {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(source, filename="<generated>")
    except SyntaxError as error:
        raise SandboxError(f"{_REJECTED}: syntax error at line {error.lineno}: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError) as error:
        raise SandboxError(f"{_REJECTED}: cannot parse ({type(error).__name__}: {error})") from None
    _strip_annotations(tree)
    bound = _bound_names(tree)
    nodes = sorted(ast.walk(tree), key=lambda node: (getattr(node, "lineno", math.inf), getattr(node, "col_offset", 0)))
    for node in nodes:
        _check_node(node, bound)
    # Attributes last, so `torch.save(...)` reports the undefined `torch` rather than `.save`.
    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr not in ALLOWED_ATTRIBUTES:
            raise _reject(node, f"reads the attribute '.{node.attr}', which is not in the allowed set")
    _check_top_level(tree, entry)
    return tree


def _strip_annotations(tree: ast.Module) -> None:
    """Drop annotations: they are evaluated at definition time and name things (torch.Tensor) not in scope."""
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.FunctionDef):
            node.returns = None
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                setattr(node, field, [_plain_assign(item) if isinstance(item, ast.AnnAssign) else item
                                      for item in value])
    ast.fix_missing_locations(tree)


def _plain_assign(node: ast.AnnAssign) -> ast.stmt:
    if node.value is None:
        return ast.copy_location(ast.Pass(), node)
    return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the source binds anywhere (scoping is ignored: a miss only becomes a NameError at run time)."""
    bound = set(SAFE_BUILTINS) | {"T", "math"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def _reject(node: ast.AST, what: str) -> SandboxError:
    line = getattr(node, "lineno", None)
    return SandboxError(f"{_REJECTED}: {f'line {line} ' if line else ''}{what}")


def _check_node(node: ast.AST, bound: set[str]) -> None:
    """One node against the rules; raises on the first broken one."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        module = node.names[0].name if isinstance(node, ast.Import) else node.module
        raise _reject(node, f"imports '{module}' (imports are not allowed)")
    if not isinstance(node, _ALLOWED_NODES):
        words = _NODE_WORDS.get(type(node), f"uses a {type(node).__name__} statement or expression")
        raise _reject(node, f"{words} (not allowed in generated code)")
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise _reject(node, f"reads the private attribute '.{node.attr}' (attributes starting with '_' are not "
                            "allowed)")
    for field in ("id", "arg", "name"):
        value = getattr(node, field, None)
        if isinstance(value, str) and value.startswith("__"):
            raise _reject(node, f"uses the name '{value}' (names starting with '__' are not allowed)")
    if isinstance(node, ast.Name):
        if node.id in FORBIDDEN_BUILTINS:
            raise _reject(node, f"uses the builtin '{node.id}' (not allowed in generated code)")
        if isinstance(node.ctx, ast.Load) and node.id not in bound:
            raise _reject(node, f"uses the undefined name '{node.id}' (available: T, math, "
                                f"{', '.join(name for name in SAFE_BUILTINS if name[0].islower())})")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
        raise _reject(node, "has a string constant containing '__' (not allowed in generated code)")
    elif isinstance(node, ast.FunctionDef) and node.decorator_list:
        raise _reject(node, f"decorates '{node.name}' (decorators are not allowed)")


def _is_constant_part(node: ast.AST) -> bool:
    """Whether a node may appear in a top-level constant: numbers, strings, tuples, arithmetic, math.pi."""
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "math"
    return isinstance(node, _CONSTANT_NODES)


def _check_top_level(tree: ast.Module, entry: str) -> None:
    """Only function definitions, constant assignments and a docstring at top level; ``entry`` takes one argument."""
    functions = {}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef):
            functions[statement.name] = statement
        elif isinstance(statement, ast.Assign):
            if not all(isinstance(target, ast.Name) for target in statement.targets) or not all(
                    _is_constant_part(node) for node in ast.walk(statement.value)):
                raise _reject(statement, "assigns something other than a constant to a name at top level "
                                         "(only function definitions and constants like SCALE = 0.5 are allowed)")
        elif not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
            raise _reject(statement, "has a top-level statement other than a function definition or a constant")
    function = functions.get(entry)
    if function is None:
        defined = ", ".join(functions) or "none"
        raise SandboxError(f"{_REJECTED}: no top-level function '{entry}' (defined functions: {defined})")
    arguments = function.args
    if (len(arguments.posonlyargs) + len(arguments.args) != 1 or arguments.vararg or arguments.kwarg
            or arguments.kwonlyargs):
        raise _reject(function, f"'{entry}' must take exactly one positional parameter (the observation dict)")


# The child process.


class _Observations(dict):
    """The obs dict the generated function receives; a missing key names the available ones."""

    def __missing__(self, key):
        raise KeyError(f"{key!r} is not an observation field (available: {', '.join(sorted(self))})")


def _library_import(name, globals=None, locals=None, fromlist=(), level=0):
    """The namespace's ``__import__``, for torch's C++ code only (it imports ``torch`` through the caller's builtins).

    Generated code cannot name it (names starting with ``__`` are rejected statically).
    """
    if level != 0 or name.partition(".")[0] not in ("torch", "numpy"):
        raise ImportError(f"imports are not allowed in generated code (tried '{name}')")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _make_namespace() -> dict:
    return {"__builtins__": {**SAFE_BUILTINS, "__import__": _library_import},
            "T": types.SimpleNamespace(**TORCH_FUNCTIONS), "math": types.SimpleNamespace(**MATH_FUNCTIONS)}


def _address_space_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def _describe_exception(error: BaseException, entry: str) -> str:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == "<generated>"]
    where = f" at line {frames[-1].lineno} (in {frames[-1].name})" if frames else ""
    message = str(error)
    if len(message) > 500:
        message = message[:500] + " ..."
    return f"generated function '{entry}' raised {type(error).__name__}{where}: {message}"


def _to_payload(result):
    """Tensors become numpy arrays (no shared memory through the pipe); anything else its type name."""
    if isinstance(result, dict):
        return {key: _to_payload(value) for key, value in result.items()}
    if isinstance(result, torch.Tensor):
        result = result.detach()
        if result.dtype in (torch.float16, torch.bfloat16):
            result = result.float()
        return result.numpy()
    return type(result).__name__


def _child_main(conn, source: str, entry: str, memory_limit_mb: float) -> None:
    """Limit the process, exec the source into the restricted namespace, then serve calls until told to close."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes the child.
    torch.set_num_threads(1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = _address_space_bytes() + int(memory_limit_mb * 2**20)
    _, as_hard = resource.getrlimit(resource.RLIMIT_AS)
    if as_hard != resource.RLIM_INFINITY:
        limit = min(limit, as_hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    try:
        code = compile(_checked_tree(source, entry), "<generated>", "exec")
        namespace = _make_namespace()
        exec(code, namespace)
        function = namespace[entry]
    except Exception as error:
        conn.send(("error", "runtime", f"defining the generated code failed: {_describe_exception(error, entry)}"))
        return
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "close":
            return
        # The parent's wall-clock limit kills first; this backstop ends a loop the parent can no longer kill.
        cpu_limit = int(time.process_time() + message[2]) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_hard))
        try:
            obs = _Observations((key, torch.from_numpy(value)) for key, value in message[1].items())
            with torch.no_grad():
                result = function(obs)
            if isinstance(result, dict) and not all(isinstance(key, str) for key in result):
                reply = ("error", "runtime", f"generated function '{entry}' returned a dict with keys "
                         f"{[key for key in result][:5]}; component names must be str")
            else:
                reply = ("ok", _to_payload(result))
        except MemoryError:
            reply = ("error", "memory", None)
        except Exception as error:
            kind = "memory" if "can't allocate memory" in str(error) else "runtime"
            reply = ("error", kind, None if kind == "memory" else _describe_exception(error, entry))
        try:
            conn.send(reply)
        except MemoryError:  # Pickling a huge result; nothing was written yet.
            conn.send(("error", "memory", None))


# The parent side.


@dataclass
class _Child:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection


class SandboxedFunction:
    """A generated function behind a process boundary; call it like the function itself.

    After a timeout or a dead child the next call starts a fresh child (counted in ``restarts``), so one bad
    batch does not end a training; an exception or MemoryError inside the function leaves the child serving.
    Results come back on the device of the observations, shape (num_envs,), floating, finite.

    Args:
        source: Python source defining ``entry`` (see `check_source` for the rules).
        entry: name of the function to call, e.g. "progress" or "compute_reward".
        returns: "tensor" for a (num_envs,) tensor, "components" for a dict of named (num_envs,) tensors.
        time_limit_s: wall-clock limit of one call, pipe transfer included [s].
        memory_limit_mb: address space the child may add to what it holds after importing torch [MiB].
        startup_timeout_s: limit for the child to import torch and define the function [s].
    """

    def __init__(self, source: str, entry: str, returns: str = "tensor", time_limit_s: float = 2.0,
                 memory_limit_mb: float = 1024, startup_timeout_s: float = 60.0):
        if returns not in ("tensor", "components"):
            raise ValueError(f"returns must be 'tensor' or 'components', got {returns!r}")
        check_source(source, entry)
        self.source = source
        """The generated source."""
        self.entry = entry
        """Name of the function called."""
        self.returns = returns
        """"tensor" or "components"."""
        self.time_limit_s = time_limit_s
        """Wall-clock limit per call [s]."""
        self.memory_limit_mb = memory_limit_mb
        """Address space the child may add after importing torch [MiB]."""
        self.startup_timeout_s = startup_timeout_s
        """Limit for a child to become ready [s]."""
        self.restarts = 0
        """Children started after the first one (each after a timeout or a dead child)."""
        self._child: _Child | None = None
        self._started = False
        self._closed = False
        self._start()

    # Properties.

    @property
    def alive(self) -> bool:
        """Whether a child process is serving calls now."""
        return self._child is not None and self._child.process.is_alive()

    # Calls.

    def __call__(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
        """Run the generated function on a batch.

        Args:
            obs: observation fields, each a (num_envs, k) tensor (any device; sent to the child on CPU).

        Returns:
            (num_envs,) tensor, or a dict of (num_envs,) tensors with ``returns="components"``, on obs' device.

        Raises:
            SandboxTimeout, SandboxMemoryError, SandboxRuntimeError, SandboxError (a dead child).
        """
        if self._closed:
            raise SandboxError(f"the sandboxed function '{self.entry}' was closed")
        num_envs, device, arrays = _to_arrays(obs)
        if self._child is None:
            self._start()
        child = self._child
        try:
            try:
                child.conn.send(("call", arrays, self.time_limit_s))
            except OSError:
                self._receive(child, "a call")  # The child died since the last call; this raises with its exit code.
            if not child.conn.poll(self.time_limit_s):
                raise SandboxTimeout(f"generated function '{self.entry}' exceeded its time limit of "
                                     f"{self.time_limit_s:g} s (an endless loop?); the next call starts a fresh "
                                     "process")
            reply = self._receive(child, "a call")
        except BaseException:
            self._kill()  # Also on Ctrl-C: a reply left in the pipe would answer the next call.
            raise
        if reply[0] == "error":
            if reply[1] == "memory":
                raise SandboxMemoryError(f"generated function '{self.entry}' exceeded its memory limit of "
                                         f"{self.memory_limit_mb:g} MiB (an unbounded allocation?)")
            raise SandboxRuntimeError(reply[2])
        return self._validated(reply[1], num_envs, device)

    def close(self) -> None:
        """Stop the child process (idempotent); later calls raise."""
        self._closed = True
        child, self._child = self._child, None
        if child is None:
            return
        try:
            child.conn.send(("close",))
        except (OSError, ValueError):
            pass
        child.process.join(timeout=1.0)
        if child.process.is_alive():
            child.process.kill()
            child.process.join()
        child.conn.close()

    def __enter__(self) -> SandboxedFunction:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # Private methods.

    def _start(self) -> None:
        if self._started:
            self.restarts += 1
        self._started = True
        context = multiprocessing.get_context("spawn")
        parent_conn, child_conn = context.Pipe()
        process = context.Process(target=_child_main, daemon=True, name=f"sandbox-{self.entry}",
                                  args=(child_conn, self.source, self.entry, self.memory_limit_mb))
        process.start()
        child_conn.close()
        self._child = _Child(process, parent_conn)
        if not parent_conn.poll(self.startup_timeout_s):
            self._kill()
            raise SandboxError(f"the sandbox process for '{self.entry}' did not start within "
                               f"{self.startup_timeout_s:g} s")
        reply = self._receive(self._child, "start-up")
        if reply[0] == "error":
            self._kill()
            raise SandboxRuntimeError(reply[2])

    def _receive(self, child: _Child, during: str):
        try:
            return child.conn.recv()
        except (EOFError, OSError):
            child.process.join(timeout=5.0)
            code = child.process.exitcode
            self._kill()
            cause = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            if code == -signal.SIGXCPU:
                cause += ", its CPU-time limit"
            raise SandboxError(f"the sandbox process for '{self.entry}' died during {during} ({cause}); "
                               "the next call starts a fresh process") from None

    def _kill(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.process.is_alive():
            child.process.kill()
        child.process.join()
        child.conn.close()

    def _validated(self, payload, num_envs: int, device: torch.device):
        if self.returns == "tensor":
            return _validated_tensor(payload, num_envs, device, self.entry, "the result")
        if not isinstance(payload, dict):
            raise SandboxRuntimeError(f"generated function '{self.entry}' returned {_describe(payload)}; "
                                      "expected a dict of named (num_envs,) tensors")
        if not payload:
            raise SandboxRuntimeError(f"generated function '{self.entry}' returned an empty dict")
        return {key: _validated_tensor(value, num_envs, device, self.entry, f"component '{key}'")
                for key, value in payload.items()}


def validate(fn: SandboxedFunction, sample_obs: dict[str, torch.Tensor]) -> None:
    """Call ``fn`` once on a sample batch before a training relies on it; raises the SandboxError it meets."""
    fn(sample_obs)


def _to_arrays(obs: dict[str, torch.Tensor]) -> tuple[int, torch.device, dict[str, np.ndarray]]:
    """Check the caller's batch and turn it into CPU numpy arrays for the pipe."""
    if not isinstance(obs, dict) or not obs:
        raise TypeError("obs must be a non-empty dict of (num_envs, k) tensors")
    num_envs = device = None
    arrays = {}
    for key, value in obs.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor) or value.ndim < 1:
            raise TypeError(f"obs[{key!r}] must be a tensor with a batch dimension, keyed by a str")
        if num_envs is None:
            num_envs, device = value.shape[0], value.device
        elif value.shape[0] != num_envs:
            raise ValueError(f"obs[{key!r}] has {value.shape[0]} rows, the other fields {num_envs}")
        arrays[key] = value.detach().cpu().numpy()
    return num_envs, device, arrays


def _describe(payload) -> str:
    if isinstance(payload, np.ndarray):
        return f"a tensor of shape {tuple(payload.shape)}"
    if isinstance(payload, dict):
        return "a dict"
    return f"a {payload}"


def _validated_tensor(payload, num_envs: int, device: torch.device, entry: str, what: str) -> torch.Tensor:
    """One result tensor: (num_envs,) (or (num_envs, 1), squeezed), floating, finite."""
    prefix = f"generated function '{entry}': {what}"
    if not isinstance(payload, np.ndarray):
        raise SandboxRuntimeError(f"{prefix} is {_describe(payload)}, expected a tensor of shape ({num_envs},)")
    if payload.shape == (num_envs, 1):
        payload = payload[:, 0]
    if payload.shape != (num_envs,):
        raise SandboxRuntimeError(f"{prefix} has shape {tuple(payload.shape)}, expected ({num_envs},) "
                                  "(one value per env)")
    if not np.issubdtype(payload.dtype, np.floating):
        raise SandboxRuntimeError(f"{prefix} has dtype {payload.dtype}, expected a floating dtype")
    finite = np.isfinite(payload)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise SandboxRuntimeError(f"{prefix} is not finite in {bad.size} of {num_envs} envs "
                                  f"(first: env {bad[0]} = {payload[bad[0]]})")
    return torch.from_numpy(payload).to(device)
