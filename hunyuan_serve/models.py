"""Which model to serve and getting it here: the default hub model, the demo model, the one download."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hunyuan_serve.config import ConfigError, EngineConfig
from hunyuan_serve.families import DEFAULT_HUB_MODEL

if TYPE_CHECKING:
    from hunyuan_serve.families.base import Family

# Files a served checkpoint does not need: other frameworks' weights and originals some repos carry.
IGNORE_PATTERNS = ["*.pth", "*.pt", "*.gguf", "*.onnx", "*.msgpack", "*.h5", "original/*", "*.md"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ModelError(ConfigError):
    """A model that cannot be fetched or read, with the reason and what to do."""


def is_hub_id(model: str) -> bool:
    """'org/name' that is not a directory here (a local path wins, as in vLLM and transformers)."""
    return bool(_HUB_ID.match(model)) and not Path(model).exists()


def served_name(model: str, named: str | None = None) -> str:
    """The model name clients see: engine.served_model_name, else a hub id as given, else a local
    checkpoint's directory name; a path on the host or in a container means nothing to a client (the
    path stays in `status` and the replica's /health, for operators)."""
    if named:
        return named
    if is_hub_id(model):
        return model
    return Path(model.rstrip("/")).name or model


def resolve_model(cfg: EngineConfig, on_gpu: bool, out: IO[str] | None = None) -> str:
    """The configured model, else the default hub model on GPUs and the embedded demo model on CPUs."""
    if cfg.model:
        _say(out, f"hunyuan-serve: serving {cfg.model}")
        return cfg.model
    if on_gpu:
        _say(out, f"hunyuan-serve: serving {DEFAULT_HUB_MODEL} (no --model given)")
        return DEFAULT_HUB_MODEL
    try:
        from hunyuan_serve.demo_model import ensure_demo_model
    except ImportError as err:
        raise ConfigError(
            f"no GPU and no --model, and the demo model is unavailable ({err}); pass --model"
        ) from None
    _say(
        out,
        "hunyuan-serve: no GPU and no --model: serving the demo model Gemma 3 270M (few-shot prompts, "
        "far below Hunyuan-MT quality). For the real one pass --model PATH_TO_Hunyuan-MT-7B "
        f"or --model {DEFAULT_HUB_MODEL}.",
    )
    return str(ensure_demo_model())


def _say(out: IO[str] | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)


def hub_cache_dir(cfg: EngineConfig) -> Path:
    """Where hub models land: engine.download_dir, else huggingface_hub's cache (HF_HOME, HF_HUB_CACHE)."""
    if cfg.download_dir:
        return Path(cfg.download_dir)
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _hub_reason(model: str, err: Exception) -> str:
    """What went wrong fetching from the hub, in words a user can act on."""
    from huggingface_hub import constants, errors

    endpoint = constants.ENDPOINT
    if isinstance(err, errors.GatedRepoError):
        return f"{model} is gated on {endpoint}: accept its licence there and log in (HF_TOKEN)"
    if isinstance(err, errors.RepositoryNotFoundError):
        return f"{model} does not exist on {endpoint} (or needs a token: HF_TOKEN)"
    if isinstance(err, errors.RevisionNotFoundError):
        return f"{model} has no such revision on {endpoint}"
    if isinstance(err, errors.LocalEntryNotFoundError):
        if constants.HF_HUB_OFFLINE:
            return (
                f"{model} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE=1 "
                "forbids downloading it: unset HF_HUB_OFFLINE, or pass --model /path/to/a/local/copy"
            )
        return f"{model} could not be reached on {endpoint} and is not cached: check the network, HF_ENDPOINT"
    return f"{model}: {type(err).__name__}: {err}"


def model_config(model: str, revision: str | None = None, cache_dir: Path | None = None) -> dict[str, Any]:
    """config.json of a local checkpoint, or of a hub model (that one file, cached once); ModelError."""
    if is_hub_id(model):
        from huggingface_hub import hf_hub_download

        try:
            path = Path(hf_hub_download(model, "config.json", revision=revision, cache_dir=cache_dir))
        except Exception as err:  # every hub failure becomes one clear reason
            raise ModelError(f"cannot fetch the model's config.json: {_hub_reason(model, err)}") from None
    else:
        path = Path(model) / "config.json"
        if not Path(model).is_dir():
            raise ModelError(f"model {model}: no such directory (and not a hub id like org/name)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ModelError(f"model {model}: cannot read {path.name}: {err}") from None
    if not isinstance(data, dict):
        raise ModelError(f"model {model}: {path.name} is not a JSON object")
    return data


def model_family(setting: str, model: str, config: dict[str, Any]) -> Family:
    """The prompt family from the checkpoint's real config and name (the one place that asks the
    family rules; a local checkpoint's own files also say whether it has a chat template)."""
    from hunyuan_serve.families.detect import family_from_config, read_model_config

    facts = read_model_config(model) if not is_hub_id(model) else {}
    return family_from_config(setting, {**config, **facts}, model)


def download_size(model: str, revision: str | None = None, cache_dir: Path | None = None) -> int | None:
    """Bytes a download of `model` would still fetch (0 when cached or local); None when unknown."""
    if not is_hub_id(model):
        return 0
    from huggingface_hub import snapshot_download

    try:
        files = snapshot_download(
            model, revision=revision, cache_dir=cache_dir, ignore_patterns=IGNORE_PATTERNS, dry_run=True
        )
    except Exception:  # offline or unreachable: the model check says why
        return None
    return sum(f.file_size or 0 for f in files if not isinstance(f, str) and f.will_download)


def check_readable(model: Path) -> None:
    """Every file of a local checkpoint readable by this process (a volume mounted from a host whose
    weights are mode 600, say): else ModelError naming the file and the uid, before a replica crash-loops."""
    for path in sorted(model.rglob("*")):
        if path.is_file() and not os.access(path, os.R_OK):
            raise ModelError(
                f"model {model}: cannot read {path} as uid {os.getuid()}: make it readable to that user "
                "(chmod a+r, or run as its owner)"
            )


def fetch_model(cfg: EngineConfig, model: str) -> Path:
    """A local directory holding the model: itself when local, else a (resumable) snapshot download
    with progress bars, honouring HF_HOME, HF_ENDPOINT and HF_HUB_OFFLINE; ModelError at once."""
    if not is_hub_id(model):
        model_config(model)  # readable, or the reason now rather than in every replica
        check_readable(Path(model))
        return Path(model)
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            model,
            revision=cfg.revision,
            cache_dir=hub_cache_dir(cfg) if cfg.download_dir else None,
            ignore_patterns=IGNORE_PATTERNS,
        )
    except Exception as err:  # every hub failure becomes one clear reason
        raise ModelError(f"cannot download the model: {_hub_reason(model, err)}") from None
    return Path(str(path))
