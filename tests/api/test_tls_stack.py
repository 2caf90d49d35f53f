"""TLS at the edge through a real `up` (Nginx and a stand-in replica): the openai and deepl clients and
curl verify it with a CA made here, HTTP/2 is negotiated, a wrong CA is refused saying why, the plain
port sends callers off the host to TLS, and a renewed certificate is served after `reload` under load
with no failed request. Heavy: `flock /tmp/hs-heavy.lock .venv/bin/pytest -q tests/api/test_tls_stack.py`.
"""

from __future__ import annotations

import datetime
import os
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepl
import httpx
import httpx2  # the HTTP client openai's SDK is built on
import openai
import pytest
import yaml

from tests.support.stacks import cli, free_ports, replicas_ready, started, tail, wait_until
from tests.support.tls_certs import CA, DAY, Pair, fingerprint_pem, make_ca, other_key

READY_TIMEOUT_S = 300.0  # `up`, Nginx and a stand-in replica on a loaded two-core machine
RELOAD_TIMEOUT_S = 120.0
# A caller that is not this host's own process: Linux routes all of 127/8 to lo, and Nginx's plain
# port serves only 127.0.0.1, ::1 and the listen address without redirecting.
FOREIGN = "127.0.0.2"
BODY = {"texts": ["Open the file"], "source_lang": "en", "target_lang": "zh"}

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(READY_TIMEOUT_S + 2 * RELOAD_TIMEOUT_S),
]


@dataclass
class Edge:
    ca: CA
    pair: Pair
    plain: str  # http://127.0.0.1:PORT, the plain port
    url: str  # https://127.0.0.1:TLS_PORT
    tls_port: int
    run_dir: Path
    log: Path
    up: subprocess.Popen[bytes]
    config: Path  # the file `up` was started with, which `reload` reads again
    settings: dict[str, Any]

    def reload(self, **nginx: object) -> subprocess.CompletedProcess[str]:
        """The config file with these nginx settings, then `hunyuan-serve reload`."""
        self.settings["nginx"].update(nginx)
        self.config.write_text(yaml.safe_dump(self.settings))
        argv = cli("reload", "--run-dir", str(self.run_dir))
        return subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S)


@pytest.fixture(scope="module")
def edge(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    work = tmp_path_factory.mktemp("tls")
    ca = make_ca(work / "ca")
    pair = ca.issue(work / "certs", "edge")  # localhost, 127.0.0.1 and ::1
    port, tls_port, base = free_ports(3)
    nginx: dict[str, object] = {"port": port, "tls_port": tls_port, "worker_processes": 1}
    nginx.update(tls_cert=str(pair.cert), tls_key=str(pair.key), plain_http="redirect", hsts_max_age_s=600)
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": {"model": str(tiny_model_dir), "stand_in": True, "max_model_len": 512},
        "replica": {"max_tokens": 8},
        "supervisor": {"probe_interval_s": 0.25, "drain_timeout_s": 5.0, "kill_timeout_s": 5.0},
        "nginx": nginx,
    }
    config, log = work / "up.yaml", work / "up.log"
    config.write_text(yaml.safe_dump(settings))
    plain = f"http://127.0.0.1:{port}"
    with started(
        cli("up", "--config", str(config)), log=log, ready=replicas_ready(plain, 1), timeout_s=READY_TIMEOUT_S
    ) as up:
        url = f"https://127.0.0.1:{tls_port}"
        yield Edge(ca, pair, plain, url, tls_port, work / "run", log, up, config, settings)


def _curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "30", *args], capture_output=True, text=True, timeout=60
    )


def test_the_openai_client_verifies_the_edge_with_the_ca(edge: Edge) -> None:
    with httpx2.Client(verify=str(edge.ca.cert), trust_env=False) as http:
        client = openai.OpenAI(base_url=edge.url + "/v1", api_key="unused", max_retries=0, http_client=http)
        model = client.models.list().data[0].id
        answer = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Translate into Chinese: Good morning"}]
        )
    assert answer.choices[0].message.content


def test_the_deepl_client_verifies_the_edge_with_the_ca(edge: Edge) -> None:
    # deepl-python sends prepared requests (Session.send), which skips the merge of requests' environment:
    # REQUESTS_CA_BUNDLE is not read, so the CA goes in through its verify_ssl option (docs/tls.md).
    translator = deepl.Translator(
        "unused-on-loopback", server_url=edge.url, send_platform_info=False, verify_ssl=str(edge.ca.cert)
    )
    try:
        result = translator.translate_text("Open the file", source_lang="EN", target_lang="ZH")
    finally:
        translator.close()
    assert isinstance(result, deepl.TextResult) and result.text


def test_curl_negotiates_http2_and_gets_hsts_over_tls_only(edge: Edge) -> None:
    done = _curl(
        "--cacert",
        str(edge.ca.cert),
        "--http2",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-w",
        "%{http_version}",
        edge.url + "/health",
    )
    assert done.returncode == 0, done.stderr
    headers, version = done.stdout.rsplit("\n", 1)
    assert version == "2" and "strict-transport-security: max-age=600" in headers.lower()
    for protocol in ("1.2", "1.3"):
        pinned = _curl(
            "--cacert",
            str(edge.ca.cert),
            f"--tlsv{protocol}",
            "--tls-max",
            protocol,
            "-o",
            "/dev/null",
            edge.url + "/health",
        )
        assert pinned.returncode == 0, (protocol, pinned.stderr)
    plain = httpx.get(edge.plain + "/health", trust_env=False)  # this host's own call: served, no HSTS
    assert plain.status_code == 200 and "strict-transport-security" not in plain.headers


def test_tls_1_1_is_refused_by_the_edge(edge: Edge) -> None:
    context = ssl.create_default_context(cafile=str(edge.ca.cert))
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # this client could speak 1.1: the refusal is the server's
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.get(edge.url + "/health", verify=context, trust_env=False)
    assert "TLSV1_ALERT_PROTOCOL_VERSION" in str(refused.value)  # the server's alert: it speaks no 1.1


def test_a_wrong_ca_is_refused_by_each_client_saying_why(edge: Edge, tmp_path: Path) -> None:
    other = make_ca(tmp_path, "other")
    with httpx2.Client(verify=str(other.cert), trust_env=False) as http:
        client = openai.OpenAI(base_url=edge.url + "/v1", api_key="unused", max_retries=0, http_client=http)
        with pytest.raises(openai.APIConnectionError) as refused:
            client.models.list()
    cause = refused.value.__cause__
    assert isinstance(cause, httpx2.ConnectError) and "CERTIFICATE_VERIFY_FAILED" in str(cause), repr(cause)
    assert "unable to get local issuer certificate" in str(cause)
    done = _curl("--cacert", str(other.cert), "-o", "/dev/null", edge.url + "/health")
    assert (
        done.returncode == 60
        and "SSL certificate problem: unable to get local issuer certificate" in done.stderr
    )


def test_the_plain_port_redirects_callers_off_the_host_keeping_path_and_query(edge: Edge) -> None:
    target = edge.plain + "/v1/models?check=1&b=%C3%A9"
    done = _curl("--interface", FOREIGN, "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", target)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"308 https://127.0.0.1:{edge.tls_port}/v1/models?check=1&b=%C3%A9"
    followed = _curl(
        "--interface",
        FOREIGN,
        "-L",
        "--cacert",
        str(edge.ca.cert),
        "-d",
        '{"texts":["Open the file"],"source_lang":"en","target_lang":"zh"}',
        "-H",
        "Content-Type: application/json",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{scheme}",
        edge.plain + "/translate",
    )
    assert followed.stdout == "200 HTTPS", followed.stderr  # a 308 keeps the POST and its body


def _served_fingerprint(edge: Edge) -> str:
    return fingerprint_pem(
        ssl.get_server_certificate(("127.0.0.1", edge.tls_port), ca_certs=str(edge.ca.cert)).encode()
    )


def _load(edge: Edge, stop: threading.Event, results: list[str]) -> None:
    """One client in a loop over TLS until stop: each outcome appended ("ok" or what went wrong)."""
    with httpx.Client(verify=str(edge.ca.cert), trust_env=False, timeout=60) as http:
        while not stop.is_set():
            try:
                response = http.post(edge.url + "/translate", json=BODY)
                results.append(
                    "ok" if response.status_code == 200 else f"{response.status_code} {response.text[:200]}"
                )
            except httpx.HTTPError as err:
                results.append(f"{type(err).__name__}: {err}")


def _install(renewed: Pair, live: Pair) -> None:
    """A renewal as certbot leaves it: new files at the paths Nginx is configured with, each whole."""
    for new, old in ((renewed.key, live.key), (renewed.cert, live.cert)):
        os.replace(new, old)


def test_a_renewed_certificate_is_served_after_reload_without_a_failed_request(
    edge: Edge, tmp_path: Path
) -> None:
    assert _served_fingerprint(edge) == edge.pair.fingerprint
    renewed = edge.ca.issue(tmp_path, "renewed")
    fingerprint = renewed.fingerprint
    stop, results = threading.Event(), list[str]()
    clients = [threading.Thread(target=_load, args=(edge, stop, results)) for _ in range(3)]
    for client in clients:
        client.start()
    try:
        wait_until(edge.up, edge.log, lambda: len(results) >= 10, RELOAD_TIMEOUT_S, "the load running")
        _install(renewed, edge.pair)
        before = len(results)
        done = subprocess.run(
            cli("reload", "--run-dir", str(edge.run_dir)),
            capture_output=True,
            text=True,
            timeout=RELOAD_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stdout + done.stderr + tail(edge.log)
        assert _served_fingerprint(edge) == fingerprint
        wait_until(
            edge.up,
            edge.log,
            lambda: len(results) >= before + 10,
            RELOAD_TIMEOUT_S,
            "the load after the reload",
        )
    finally:
        stop.set()
        for client in clients:
            client.join(60)
    failed = [r for r in results if r != "ok"]
    assert not failed, f"{len(failed)} of {len(results)} failed: {failed[:5]}"
    print(f"\n{len(results)} requests over TLS through the renewal, {len(results) - before} after it began")


def test_a_pair_at_new_paths_in_the_config_is_served_after_reload(edge: Edge, tmp_path: Path) -> None:
    renewed = edge.ca.issue(tmp_path / "new", "renewed")
    done = edge.reload(tls_cert=str(renewed.cert), tls_key=str(renewed.key))
    assert done.returncode == 0, done.stdout + done.stderr + tail(edge.log)
    assert _served_fingerprint(edge) == renewed.fingerprint


def test_reload_refuses_an_expired_or_mismatched_pair_and_keeps_serving(edge: Edge, tmp_path: Path) -> None:
    serving = _served_fingerprint(edge)
    now = datetime.datetime.now(datetime.UTC)
    expired = edge.ca.issue(tmp_path, "expired", not_before=now - 30 * DAY, not_after=now - DAY)
    stray = other_key(tmp_path / "stray.key")
    for cert, key, why in (
        (expired.cert, expired.key, f"nginx.tls_cert {expired.cert} expired on "),
        (expired.cert, stray, f"nginx.tls_key {stray} does not match the certificate"),
    ):
        done = edge.reload(tls_cert=str(cert), tls_key=str(key))
        assert done.returncode == 1 and "refused, nothing was changed" in done.stderr, (
            done.stdout + done.stderr
        )
        assert why in done.stderr
        assert _served_fingerprint(edge) == serving
