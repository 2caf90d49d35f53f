"""Rendered Nginx config and systemd unit: golden files, `nginx -t`, `systemd-analyze verify`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from hunyuan_serve import systemd_unit, templating
from hunyuan_serve.config import ConfigError, NginxConfig, build_config
from hunyuan_serve.edge import dialects, filters, layout, render
from hunyuan_serve.edge.layout import route_script
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from tests.support.edge import NGINX, nginx_t

from . import golden


def test_golden_files_in_deploy_are_current() -> None:
    # Regenerate with: .venv/bin/python tests/edge/golden.py
    assert golden.GOLDEN_NGINX.read_text(encoding="utf-8") == golden.sample_nginx()
    assert golden.GOLDEN_SYSTEMD.read_text(encoding="utf-8") == golden.sample_systemd()
    assert golden.GOLDEN_POOLS.read_text(encoding="utf-8") == golden.sample_pools_nginx()


def test_deploy_dirs_show_the_templates_the_renderer_loads() -> None:
    # deploy/ links to the packaged templates, so a copy there cannot drift from what `up` renders.
    for shown, env, name in (
        (golden.REPO / "deploy/nginx/nginx.conf.j2", render.environment(), render.NGINX_TEMPLATE),
        (
            golden.REPO / "deploy/systemd/hunyuan-serve.service.j2",
            systemd_unit.unit_environment(),
            systemd_unit.SYSTEMD_TEMPLATE,
        ),
    ):
        loaded = env.get_template(name).filename
        assert loaded is not None and shown.is_symlink(), shown
        assert shown.resolve(strict=True) == Path(loaded).resolve(strict=True), shown
    shown = golden.REPO / "deploy/nginx/route.js"
    assert shown.is_symlink() and shown.resolve(strict=True) == route_script().resolve(strict=True)


def test_nginx_config_holds_the_required_directives() -> None:
    text = golden.sample_nginx()
    for needle in (
        "zone hs_replicas 64k;",
        "least_conn;",
        "keepalive 32;",
        "max_fails=1 fail_timeout=2s",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_next_upstream error timeout http_502 http_503 non_idempotent;",
        "proxy_next_upstream_tries 3;",
        "proxy_next_upstream_timeout 300s;",
        "proxy_connect_timeout 1s;",
        "proxy_read_timeout 300s;",
        "client_max_body_size 8m;",
        "server_tokens off;",
        "log_format hs_json escape=json",
        '"request_time":$request_time',
        '"upstream_connect_time":"$upstream_connect_time"',
        '"upstream_header_time":"$upstream_header_time"',
        '"upstream_response_time":"$upstream_response_time"',
        '"upstream_addr":"$upstream_addr"',
        "proxy_set_header X-Request-ID $hs_request_id;",
        "listen 0.0.0.0:8080;",
        # What a replica runs and lets wait: max_in_flight 256 + max_queued 2048.
        "server 127.0.0.1:8101 max_fails=1 fail_timeout=2s max_conns=2304;",
        "server 127.0.0.1:8103 max_fails=1 fail_timeout=2s max_conns=2304 down;",
        '"ready":2,"replicas":3,"config":7',
    ):
        assert needle in text, needle
    assert "limit_req" not in text


def _render(overrides: dict[str, object], states: list[State]) -> str:
    cfg = build_config({}, overrides)
    routing = routing_from_states([(f"127.0.0.1:{8101 + i}", s) for i, s in enumerate(states)])
    return render.render_nginx(cfg, routing, prefix=Path("/p"), web_root=Path("/w"), worker_user=None)


def test_no_ready_replica_gives_a_503_health_with_retry_after() -> None:
    text = _render({"nginx.retry_after_s": 4}, [State.STARTING, State.FAILED])
    health = text[text.index("location = /health") :].split("}", 2)
    assert "return 503" in health[0] + health[1] and "add_header Retry-After 4 always;" in health[0]
    assert "return 200" not in health[0] + health[1]


def test_options_change_the_config() -> None:
    text = _render(
        {
            "nginx.balance": "round_robin",
            "nginx.rate_limit_rps": 2.5,
            "nginx.rate_limit_burst": 7,
            "nginx.read_timeout_s": 1.5,
            "nginx.expose_metrics": True,
        },
        [State.READY],
    )
    assert "least_conn" not in text
    assert "rate=150r/m" in text and "limit_req zone=hs_per_client burst=7 nodelay;" in text
    assert "limit_req_status 429;" in text and "proxy_read_timeout 1500ms;" in text
    assert "location /metrics" in text


@pytest.mark.parametrize(
    ("value", "expected"), [(1.0, "1s"), (300, "300s"), (0.25, "250ms"), (0.0001, "1ms")]
)
def test_nginx_time(value: float, expected: str) -> None:
    assert filters.nginx_time(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(5, "5r/s"), (0.5, "30r/m"), (2.5, "150r/m")])
def test_nginx_rate(value: float, expected: str) -> None:
    assert filters.nginx_rate(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("/usr/bin/x", "/usr/bin/x"), ("a b", '"a b"'), ('q"$', '"q\\"$$"'), ("50%", "50%%")],
)
def test_systemd_quote(value: str, expected: str) -> None:
    assert systemd_unit.systemd_quote(value) == expected


def test_undefined_template_variable_is_an_error() -> None:
    env = render.environment()
    with pytest.raises(jinja2.UndefinedError):
        env.get_template(render.NGINX_TEMPLATE).render(nginx=build_config({}, {}).nginx)


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
@pytest.mark.parametrize(
    ("overrides", "states"),
    [
        ({}, [State.READY, State.STARTING]),
        ({}, [State.EVICTED, State.FAILED]),
        (
            {"nginx.rate_limit_rps": 0.5, "nginx.balance": "round_robin", "nginx.expose_metrics": True},
            [State.READY],
        ),
        (
            {"auth.key_rate_limit_rps": 2, "nginx.rate_limit_rps": 1, "nginx.cors_origins": "*"},
            [State.READY],
        ),
        ({"auth.key_rate_limit_rps": 0.5, "nginx.cors_origins": "https://a.example"}, [State.STARTING]),
    ],
)
def test_rendered_config_passes_nginx_t(
    tmp_path: Path, overrides: dict[str, object], states: list[State]
) -> None:
    cfg = build_config({}, overrides)
    routing = routing_from_states([(f"127.0.0.1:{8101 + i}", s) for i, s in enumerate(states)])
    text = render.render_nginx(cfg, routing, prefix=tmp_path, web_root=tmp_path / "web", worker_user=None)
    out = nginx_t(tmp_path, text)
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    cfg = golden.sample_config()
    text = systemd_unit.render_systemd(
        cfg,
        argv=[sys.executable, "-m", "hunyuan_serve", "up", "--config", "/etc/x y.yaml"],
        run_dir=Path("/run/hunyuan-serve"),
        working_dir=tmp_path,
        user=None,
        replicas=3,
        config_path="/etc/x y.yaml",
    )
    unit = tmp_path / "hunyuan-serve.service"
    unit.write_text(text)
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "hunyuan-serve.service" not in out.stderr, out.stderr
    assert f"TimeoutStopSec={systemd_unit.stop_timeout_s(cfg)}" in text
    assert systemd_unit.stop_timeout_s(cfg) > cfg.supervisor.drain_timeout_s
    assert "KillMode=mixed" in text and "Restart=on-failure" in text and "LimitMEMLOCK=infinity" in text


def test_systemctl_reload_sends_up_a_sighup(tmp_path: Path) -> None:
    # The unit's ExecReload line run as systemd runs it ($MAINPID: `up`'s pid) on a process that records
    # the signals it gets: SIGHUP is what `up` takes as a rolling reload.
    lines = [line for line in golden.sample_systemd().splitlines() if line.startswith("ExecReload=")]
    assert len(lines) == 1, lines
    got = tmp_path / "got"
    code = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGHUP, lambda n, f: (open({str(got)!r}, 'w').write('HUP'), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as main:
        assert main.stdout is not None and main.stdout.readline() == "ready\n"
        argv = lines[0].removeprefix("ExecReload=").replace("$MAINPID", str(main.pid)).split()
        assert subprocess.run(argv, timeout=30).returncode == 0
        assert main.wait(30) == 0
    assert got.read_text() == "HUP"


def test_a_template_changed_after_the_environment_was_built_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The packaged templates copied, so the test can change one under a built environment as an
    # upgrade would under a running `up`.
    shutil.copytree(golden.REPO / "hunyuan_serve" / "templates", tmp_path / "templates")
    monkeypatch.setattr(
        templating.jinja2, "PackageLoader", lambda *_: jinja2.FileSystemLoader(tmp_path / "templates")
    )
    env = systemd_unit.unit_environment()
    first = env.get_template(systemd_unit.SYSTEMD_TEMPLATE)
    changed = tmp_path / "templates" / systemd_unit.SYSTEMD_TEMPLATE
    changed.write_text("changed {{ nothing }}\n", encoding="utf-8")
    later = changed.stat().st_mtime + 60
    os.utime(changed, (later, later))
    assert env.get_template(systemd_unit.SYSTEMD_TEMPLATE) is first


def test_every_dialect_is_proxied_and_nginx_errors_use_one_table() -> None:
    text = golden.sample_nginx()
    for path in ("/translate", "/languages", "/v1/", "/libretranslate/", "/v2/", "/immersive/translate"):
        assert f"location {path} {{" in text, path
    for code, (status, _message) in dialects.EDGE_ERRORS.items():
        assert f"return {status} $hs_error_{code};" in text, code
    assert '"~^/v2/" deepl;' in text and 'libretranslate \'{"error":"no replica can take this' in text
    # Keys never reach the log: the query (?token=) is not logged, nor any header.
    assert '"uri":"$uri"' in text and "$request_uri" not in text and '$http_authorization"' not in text
    assert "passing a request to the next server is only possible if nothing" in text
    assert "hs_per_key" not in text and "add_header Access-Control" not in text


def test_key_limit_and_cors_render_only_when_configured() -> None:
    text = _render(
        {
            "auth.key_rate_limit_rps": 5,
            "auth.key_rate_limit_burst": 3,
            "nginx.cors_origins": "https://app.example,http://127.0.0.1:9000",
        },
        [State.READY],
    )
    assert "limit_req_zone $hs_limit_key zone=hs_per_key:10m rate=5r/s;" in text
    assert "limit_req zone=hs_per_key burst=3 nodelay;" in text and "limit_req_status 429;" in text
    assert '"https://app.example" $http_origin;' in text and '"http://127.0.0.1:9000" $http_origin;' in text
    assert "if ($request_method = OPTIONS) {" in text and "add_header Vary Origin always;" in text
    anyone = _render({"nginx.cors_origins": "*"}, [State.READY])
    assert 'default "*";' in anyone and "Vary Origin" not in anyone
    assert f'OPTIONS "{", ".join(dialects.REQUEST_HEADERS)}";' in text


# Headers the replica reads that a page never preflights: the browser's own, and those Nginx sets.
NOT_PREFLIGHTED = {"content-length", "host", "x-forwarded-for"}


def test_cors_allows_exactly_the_request_headers_the_apis_read() -> None:
    """Every header name the replica's code reads (request.headers.get("..."), `"..." in headers`, the
    priority header) is in dialects.REQUEST_HEADERS, which the preflight allows, and nothing else is."""
    from hunyuan_serve.replica.admission import priority

    root = golden.REPO / "hunyuan_serve"
    read = {priority.HEADER.lower()}
    pattern = re.compile(
        r"""headers\.get\(\s*["']([A-Za-z0-9-]+)["']|["']([A-Za-z0-9-]+)["'] in \w*\.?headers"""
    )
    for path in [*sorted((root / "auth").rglob("*.py")), *sorted((root / "replica").rglob("*.py"))]:
        for got, inside in pattern.findall(path.read_text(encoding="utf-8")):
            read.add((got or inside).lower())
    assert read - NOT_PREFLIGHTED == {h.lower() for h in dialects.REQUEST_HEADERS}


# -- several pools: one upstream each, routing by model in njs ---------------------------------------

TWO_POOLS = {
    "pools": [
        {"name": "mt", "model": "tencent/Hunyuan-MT-7B", "replicas": 2},
        {"name": "chimera", "model": "tencent/Hunyuan-MT-Chimera-7B", "engine": {"max_num_seqs": 8}},
    ]
}


def _pooled(
    data: dict[str, object], states: list[tuple[str, State]], overrides: dict[str, object] | None = None
) -> str:
    cfg = build_config(data, overrides or {})
    members = [(f"127.0.0.1:{8101 + i}", s) for i, (_, s) in enumerate(states)]
    names = [f"replica-{i}" for i in range(len(states))]
    routing = routing_from_states(members, names, [pool for pool, _ in states])
    return render.render_nginx(cfg, routing, prefix=Path("/p"), web_root=Path("/w"), worker_user=None)


def _block(text: str, head: str) -> str:
    start = text.index(head)
    return text[start : text.index("}", start)]


def _health(text: str) -> tuple[int, dict[str, object]]:
    block = text[text.index("location = /health") :]
    line = next(x for x in block.splitlines() if x.strip().startswith("return "))
    status, body = line.strip().removeprefix("return ").split(" ", 1)
    return int(status), json.loads(body.rstrip(";").strip("'").replace("\\'", "'").replace("\\\\", "\\"))


READY_BOTH = [("mt", State.READY), ("mt", State.STARTING), ("chimera", State.READY)]


def test_two_pools_give_two_upstreams_each_with_its_own_cap() -> None:
    text = _pooled(TWO_POOLS, READY_BOTH, {"engine.device": "cpu", "replica.max_queued": 0})
    mt, chimera = _block(text, "upstream hs_pool_mt {"), _block(text, "upstream hs_pool_chimera {")
    # The cap is each pool's edge_max_conns (no replica queue: what its engine batches): mt's CPU
    # default, chimera's own max_num_seqs.
    assert "server 127.0.0.1:8101 max_fails=1 fail_timeout=2s max_conns=128;" in mt
    assert "server 127.0.0.1:8102 max_fails=1 fail_timeout=2s max_conns=128 down;" in mt
    assert "server 127.0.0.1:8103 max_fails=1 fail_timeout=2s max_conns=8;" in chimera
    for block in (mt, chimera):
        assert "least_conn;" in block and "keepalive 32;" in block and "zone hs_pool_" in block
    assert "8103" not in mt and "8101" not in chimera and "hs_replicas" not in text
    assert (
        text.startswith("# Rendered")
        and '\nload_module "/usr/lib/nginx/modules/ngx_http_js_module.so";' in text
    )
    # Retries stay within the pool: each named location proxies to its own upstream.
    named = _block(text, "location @hs_pool_chimera {")
    assert "proxy_pass http://hs_pool_chimera;" in named and "proxy_next_upstream_tries 3;" in named
    routed = _block(text, "location /v1/chat/completions {")
    assert "js_content hs.route;" in routed and "client_body_buffer_size 8m;" in routed
    assert "proxy_pass http://hs_pool_mt;" in _block(text, "location /v2/ {")
    internal = text[text.index("location /_hs/pool/chimera/ {") :]
    assert "return 403" in internal and "proxy_pass http://hs_pool_chimera/;" in internal


def test_a_pool_with_no_server_yet_is_listed_down() -> None:
    text = _pooled(TWO_POOLS, [("mt", State.READY)])
    assert "server 127.0.0.1:9 down;" in _block(text, "upstream hs_pool_chimera {")


def test_one_pool_renders_as_its_settings_at_the_top_level_would() -> None:
    # No njs, no per-pool upstream: byte for byte today's config (the golden files hold the plain one).
    one = {"pools": [{"name": "mt", "model": "tencent/Hunyuan-MT-7B", "engine": {"max_num_seqs": 16}}]}
    plain = {"engine": {"model": "tencent/Hunyuan-MT-7B", "max_num_seqs": 16}}
    states = [("mt", State.READY), ("mt", State.STARTING)]
    no_queue = {"replica.max_queued": 0}  # the cap is then the pool's own max_num_seqs
    pooled = _pooled(one, states, no_queue)
    assert pooled == _pooled(plain, [("default", s) for _, s in states], no_queue)
    assert "js_" not in pooled and "load_module" not in pooled and "max_conns=16" in pooled


@pytest.mark.parametrize(
    ("states", "status", "code"),
    [
        (READY_BOTH, "ready", 200),
        ([("mt", State.READY), ("chimera", State.FAILED)], "degraded", 200),
        ([("mt", State.STARTING), ("chimera", State.READY)], "unavailable", 503),
    ],
)
def test_health_with_several_pools_follows_the_default_pool(
    states: list[tuple[str, State]], status: str, code: int
) -> None:
    answered, body = _health(_pooled(TWO_POOLS, states))
    assert (answered, body["status"]) == (code, status)
    pools = body["pools"]
    assert isinstance(pools, dict) and set(pools) == {"mt", "chimera"}
    assert pools["chimera"]["model"] == "tencent/Hunyuan-MT-Chimera-7B"
    assert body["model"] == "tencent/Hunyuan-MT-7B"  # the default pool's


def test_health_follows_the_configured_default_pool() -> None:
    states = [("mt", State.READY), ("chimera", State.FAILED)]
    code, body = _health(_pooled({**TWO_POOLS, "default_pool": "chimera"}, states))
    assert (code, body["status"], body["model"]) == (503, "unavailable", "tencent/Hunyuan-MT-Chimera-7B")


@pytest.mark.parametrize(
    ("data", "states", "needle"),
    [
        (
            {"pools": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}]},
            [("a", State.READY)],
            "pools a and b both serve 'm'",
        ),
        (TWO_POOLS, [("other", State.READY)], "the routing names pools the config lacks: other"),
        ({**TWO_POOLS, "nginx": {"client_max_body_size": "0"}}, READY_BOTH, "client_max_body_size: 0"),
    ],
)
def test_pools_the_edge_cannot_route_are_refused(
    data: dict[str, object], states: list[tuple[str, State]], needle: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        _pooled(data, states)


def test_dialect_pool_must_be_a_pool() -> None:
    with pytest.raises(ConfigError, match=r"nginx\.dialect_pool: 'nope' is not a pool"):
        build_config({**TWO_POOLS, "nginx": {"dialect_pool": "nope"}}, {})
    text = _pooled({**TWO_POOLS, "nginx": {"dialect_pool": "chimera"}}, READY_BOTH)
    for path in ("/libretranslate/", "/v2/", "/immersive/translate"):
        assert "proxy_pass http://hs_pool_chimera;" in _block(text, f"location {path} {{"), path
    assert "proxy_pass http://hs_pool_mt;" in _block(text, "location /languages {")


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
@pytest.mark.skipif(not Path(NginxConfig().js_module).exists(), reason="njs is not installed")
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"auth.key_rate_limit_rps": 2, "nginx.rate_limit_rps": 1, "nginx.cors_origins": "*"},
        {
            "nginx.expose_metrics": True,
            "nginx.cors_origins": "https://a.example",
            "nginx.dialect_pool": "chimera",
        },
        {"auth.keys_file": "/nonexistent/keys", "nginx.status_port": 9000},
    ],
)
def test_two_pool_config_with_njs_passes_nginx_t(tmp_path: Path, overrides: dict[str, object]) -> None:
    cfg = build_config(TWO_POOLS, overrides)
    states = [(f"127.0.0.1:{8101 + i}", s) for i, (_, s) in enumerate(READY_BOTH)]
    routing = routing_from_states(states, (), [pool for pool, _ in READY_BOTH])
    script = tmp_path / "a dir" / "route.js"  # a path with a space, as a venv's may have
    script.parent.mkdir()
    script.write_text(route_script().read_text())
    text = render.render_nginx(
        cfg, routing, prefix=tmp_path, web_root=tmp_path / "web", worker_user=None, script=script
    )
    out = nginx_t(tmp_path, text)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("listen", "own"),
    [("127.0.0.1", None), ("0.0.0.0", None), ("::", None), ("[::1]", None), ("10.1.2.3", "10.1.2.3")],
)
def test_nginx_on_one_address_counts_that_address_as_its_hosts_own(listen: str, own: str | None) -> None:
    """A replica reaches /_hs/pool/ on the address Nginx listens on (its chimera_url), from that address."""
    assert layout.own_address(listen) == own
    geo = _block(
        _pooled(TWO_POOLS, READY_BOTH, {"nginx.listen": listen, "auth.allow_open": True}), "geo $hs_loopback"
    )
    assert (f"{own} 1;" in geo) is (own is not None)
