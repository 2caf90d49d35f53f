"""The one configuration model, split by concern into the modules below; its public names, listed once."""

from __future__ import annotations

from hunyuan_serve.config.base import (
    ConfigError,
    SecretFileError,
    Section,
    error_key,
    format_error,
    validation_problems,
    yaml_problem,
)
from hunyuan_serve.config.devices import gpus_value, parse_gpus, split_devices
from hunyuan_serve.config.edge import AuthConfig, GatewayConfig, NginxConfig
from hunyuan_serve.config.engine import EngineConfig
from hunyuan_serve.config.files import (
    build_config,
    config_to_yaml,
    default_run_dir,
    load_config_file,
    read_yaml,
)
from hunyuan_serve.config.flags import (
    POOL_FLAG,
    add_config_flags,
    config_from_args,
    overrides_from_args,
    pool_from_flag,
)
from hunyuan_serve.config.operations import LogsConfig, SupervisorConfig
from hunyuan_serve.config.replica import ReplicaConfig, redis_url_problem
from hunyuan_serve.config.serve import (
    DEFAULT_POOL,
    POOL_NAME,
    Pool,
    PoolConfig,
    ServeConfig,
    default_pool,
    resolve_pools,
)

__all__ = [
    "DEFAULT_POOL",
    "POOL_FLAG",
    "POOL_NAME",
    "AuthConfig",
    "ConfigError",
    "EngineConfig",
    "GatewayConfig",
    "LogsConfig",
    "NginxConfig",
    "Pool",
    "PoolConfig",
    "ReplicaConfig",
    "SecretFileError",
    "Section",
    "ServeConfig",
    "SupervisorConfig",
    "add_config_flags",
    "build_config",
    "config_from_args",
    "config_to_yaml",
    "default_pool",
    "default_run_dir",
    "error_key",
    "format_error",
    "gpus_value",
    "load_config_file",
    "overrides_from_args",
    "parse_gpus",
    "pool_from_flag",
    "read_yaml",
    "redis_url_problem",
    "resolve_pools",
    "split_devices",
    "validation_problems",
    "yaml_problem",
]
