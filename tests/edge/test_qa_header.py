"""The answer checks' header reaches a browser page: Nginx passes it on and CORS exposes it."""

from __future__ import annotations

import re
from pathlib import Path

from hunyuan_serve.config import build_config
from hunyuan_serve.edge import render
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.qa.flags import HEADER
from hunyuan_serve.run.health import State


def test_the_qa_header_is_exposed_to_pages_and_never_hidden() -> None:
    cfg = build_config({}, {"nginx.cors_origins": "https://app.example"})
    routing = routing_from_states([("127.0.0.1:8101", State.READY)])
    text = render.render_nginx(cfg, routing, prefix=Path("/p"), web_root=Path("/w"), worker_user=None)
    exposed = re.findall(r'add_header Access-Control-Expose-Headers "([^"]*)" always;', text)
    assert exposed and all(HEADER in each.split(", ") for each in exposed)
    assert f"proxy_hide_header {HEADER}" not in text
