"""GPU ids as the config takes them: parsing and tensor-parallel groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hunyuan_serve.config.base import ConfigError


def gpus_value(value: Any) -> Any:
    if isinstance(value, str):
        return parse_gpus(value)
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)):  # a YAML list: "0" and 0 are the same device
        return parse_gpus(",".join(str(v) for v in value)) or ()
    return value


def split_devices(ids: Sequence[int | str], tp: int) -> list[tuple[int | str, ...]]:
    """Devices in groups of tensor_parallel_size; the one check that they divide (config and plan)."""
    if len(ids) % tp:
        raise ConfigError(f"gpus: {len(ids)} devices do not split into groups of {tp} (tensor_parallel_size)")
    return [tuple(ids[i : i + tp]) for i in range(0, len(ids), tp)]


def _device_id(part: str) -> int | str:
    part = part.strip()
    if part.isdigit():
        return int(part)
    if part.startswith(("GPU-", "MIG-")) and len(part) > 4:
        return part
    raise ValueError(f"gpus must be device numbers or GPU-/MIG- UUIDs, got {part!r}")


def parse_gpus(text: str) -> tuple[int | str, ...] | None:
    """Parse '0,1,2' into (0, 1, 2) and UUIDs (GPU-..., MIG-...) as given; 'all' or '' means every
    visible device (None)."""
    text = text.strip()
    if text in ("", "all"):
        return None
    try:
        ids = tuple(_device_id(part) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise ValueError(f"{err} (in {text!r})") from None
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus must be distinct, got {text!r}")
    return ids
