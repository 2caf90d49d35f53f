"""Which sampling a request gets: its own value, else the config's, else the model family's recommendation."""

from __future__ import annotations

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families import SamplingDefaults, sampling_defaults
from hunyuan_serve.families.build import canonical_family


def replica_sampling(cfg: ReplicaConfig, family: str, model: str) -> SamplingDefaults:
    """The defaults a replica applies to every request: each config field set, else the family's value."""
    table = sampling_defaults(canonical_family(family), model)
    return SamplingDefaults(
        temperature=table.temperature if cfg.temperature is None else cfg.temperature,
        top_p=table.top_p if cfg.top_p is None else cfg.top_p,
        top_k=table.top_k if cfg.top_k is None else cfg.top_k,
        repetition_penalty=table.repetition_penalty
        if cfg.repetition_penalty is None
        else cfg.repetition_penalty,
    )
