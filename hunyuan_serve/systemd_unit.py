"""Renders the systemd unit that runs `up`, from its packaged template."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import jinja2

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.templating import strict_environment

SYSTEMD_TEMPLATE = "systemd/hunyuan-serve.service.j2"

_SYSTEMD_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(value: object) -> str:
    """One word of a unit file line, quoted so systemd neither splits nor expands it."""
    text = str(value).replace("%", "%%")
    if _SYSTEMD_PLAIN.match(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped}"'


def unit_environment() -> jinja2.Environment:
    """The packaged systemd template, with the filter that quotes a word of a unit file."""
    return strict_environment("hunyuan_serve", systemd_quote=systemd_quote)


def stop_timeout_s(cfg: ServeConfig) -> int:
    """How long systemd waits after SIGTERM: drain, then the replicas' stop, with margin."""
    sup = cfg.supervisor
    return math.ceil(sup.drain_timeout_s + 2 * sup.kill_timeout_s + cfg.nginx.reload_timeout_s + 15)


def render_systemd(
    cfg: ServeConfig,
    *,
    argv: Sequence[str],
    run_dir: Path,
    working_dir: Path,
    user: str | None,
    replicas: int,
    config_path: str,
    env: jinja2.Environment | None = None,
) -> str:
    """The unit that runs `up` under systemd, reading the config file at config_path."""
    template = (env or unit_environment()).get_template(SYSTEMD_TEMPLATE)
    return template.render(
        argv=list(argv),
        exe=argv[0],
        run_dir=str(run_dir),
        working_dir=str(working_dir),
        user=user,
        replicas=replicas,
        nginx=cfg.nginx,
        supervisor=cfg.supervisor,
        start_limit_interval_s=math.ceil(cfg.supervisor.crash_loop_window_s),
        stop_timeout_s=stop_timeout_s(cfg),
        config_path=config_path,
    )
