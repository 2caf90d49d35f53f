"""Which store and job queue a replica opens, and where their files are, from its configuration."""

from __future__ import annotations

import os
from pathlib import Path

from hunyuan_serve.cache.redis_layer import RedisSettings
from hunyuan_serve.config import ServeConfig, default_run_dir
from hunyuan_serve.storage.jobs import Documents
from hunyuan_serve.storage.jobs_redis import RedisDocumentJobs
from hunyuan_serve.storage.jobs_sqlite import DocumentJobs
from hunyuan_serve.storage.memory import MemoryStore
from hunyuan_serve.storage.memory_redis import RedisMemory
from hunyuan_serve.storage.memory_sqlite import SqliteMemory
from hunyuan_serve.storage.per_key import RedisStore, SqliteStore, Store

STORE_FILE = "store.sqlite"


def store_path(cfg: ServeConfig) -> Path:
    """replica.store_path, else store.sqlite in the run dir (the one `up` and its replicas share)."""
    if cfg.replica.store_path:
        return Path(cfg.replica.store_path)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(os.environ)
    return run_dir / STORE_FILE


def redis_settings(cfg: ServeConfig) -> RedisSettings:
    """The translation cache's Redis link (its TLS too), no expiry: glossaries, counts and jobs are kept."""
    return RedisSettings.of_replica(cfg.replica, 0)


def store_from_config(cfg: ServeConfig) -> Store:
    """Redis when replica.cache_redis_url says the hosts share (with the cache's settings), else SQLite."""
    rcfg = cfg.replica
    if rcfg.cache_redis_url:
        return RedisStore(redis_settings(cfg))
    return SqliteStore(store_path(cfg), rcfg.cache_busy_timeout_s)


def memory_from_config(cfg: ServeConfig) -> MemoryStore:
    """The translation memories beside the glossaries: Redis when the hosts share, else the store file."""
    rcfg = cfg.replica
    if rcfg.cache_redis_url:
        return RedisMemory(redis_settings(cfg), rcfg.memory_import_timeout_s)
    return SqliteMemory(store_path(cfg), rcfg.cache_busy_timeout_s)


def documents_path(cfg: ServeConfig) -> Path:
    """The document jobs live in the store's SQLite file (store_path, else store.sqlite in the run dir)."""
    return store_path(cfg)


def document_cache_path(cfg: ServeConfig) -> Path:
    """The segments document jobs translated: replica.document_cache_path, else in the run dir."""
    if cfg.replica.document_cache_path:
        return Path(cfg.replica.document_cache_path)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(os.environ)
    return run_dir / "document-cache.sqlite"


def documents_from_config(cfg: ServeConfig) -> Documents:
    """Redis when replica.cache_redis_url says the hosts share, else the host's SQLite store file."""
    rcfg = cfg.replica
    if rcfg.cache_redis_url:
        return RedisDocumentJobs(redis_settings(cfg), rcfg.cache_busy_timeout_s)
    return DocumentJobs(documents_path(cfg), rcfg.cache_busy_timeout_s)
