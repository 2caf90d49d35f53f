"""Two network-namespace hosts behind the gateway over mutual TLS: each host a real `up` (one replica,
engine.stand_in, on the host's address; its Nginx with TLS; the replica with TLS and the gateway's CA for
client certificates), the gateway in the root namespace with the CA and its client certificate.

A capture of the bridge (tcpdump) runs from before the hosts start until the load is done: it must hold
the TLS hops (the SNI name each replica is verified for) and no peer secret, API key or source text.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import re
import signal
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from bench import netns
from hunyuan_serve.run.state import read_state
from tests.support.gateway import GatewayRun
from tests.support.stacks import cli, free_ports, started, wait_until
from tests.support.tls_certs import CA, Pair, make_ca

START_TIMEOUT_S = 120.0  # two stand-in replicas (a tokenizer each, no model) and their Nginx
SECRET = "netns-tls-peer-secret-0123456789abcdef"
KEY = "netns-tls-api-key-fedcba9876543210"
SOURCE = "Quarterly-ledger-7731 of the Zurich office"  # the text sent, never on the wire in clear
TLS_NAME = "replicas.hs.test"  # the name every host's replica certificate carries
HOST_PORT, HOST_TLS_PORT, REPLICA_PORT = 8080, 8443, 8101
REQUESTS, CLIENTS = 40, 4  # the bounded load
TCPDUMP = Path("/usr/bin/tcpdump")
UNAVAILABLE = netns.unavailable()

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no network namespaces: {UNAVAILABLE}"),
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.skipif(not TCPDUMP.exists(), reason="tcpdump is not installed (deploy/install.sh)"),
    pytest.mark.timeout(4 * START_TIMEOUT_S),
]


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _host_config(work: Path, host: netns.Host, model: Path, ca: CA, pair: Pair) -> Path:
    """`up` on one host: its replica and Nginx on the host's address, both with TLS (one certificate
    for the host's address and TLS_NAME); the replica takes callers off the host only with a client
    certificate the CA signed; the secret and the keys as the gateway's."""
    settings = {
        "replicas": 1,
        "base_port": REPLICA_PORT,
        "run_dir": str(work / f"run-{host.name}"),
        "engine": {"model": str(model), "stand_in": True},
        "replica": {
            "host": host.addr,
            "max_tokens": 8,
            "tls_cert": str(pair.cert),
            "tls_key": str(pair.key),
            "tls_client_ca": str(ca.cert),
        },
        "supervisor": {"probe_interval_s": 0.25, "drain_timeout_s": 5.0},
        "nginx": {
            "listen": host.addr,
            "port": HOST_PORT,
            "worker_processes": 1,
            "tls_cert": str(pair.cert),
            "tls_key": str(pair.key),
            "tls_port": HOST_TLS_PORT,
            "plain_http": "off",
        },
        "auth": {"peer_secret_file": str(work / "peer.secret"), "keys_file": str(work / "keys.txt")},
    }
    path = work / f"up-{host.name}.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def _inventory(work: Path, lab: netns.Lab, ca: CA, client: Pair, port: int) -> Path:
    data = {
        "peer_secret_file": str(work / "peer.secret"),
        "hosts": [{"name": h.name, "url": f"https://{h.addr}:{HOST_TLS_PORT}"} for h in lab.net.hosts],
        "tls_ca": str(ca.cert),
        "tls_cert": str(client.cert),
        "tls_key": str(client.key),
        "tls_name": TLS_NAME,
        "gateway": {"discovery_interval_s": 0.5, "probe_interval_s": 0.25},
        "nginx": {"port": port, "worker_processes": 1},
        "auth": {"keys_file": str(work / "keys.txt")},
    }
    path = work / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@contextlib.contextmanager
def _capture(interface: str, pcap: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """tcpdump of every packet on interface, whole, written as it comes; stopped (flushed) on exit.
    Immediate mode: by default the kernel hands packets over a block at a time, and what a block still
    held when tcpdump stops would never reach the file. A 64 MiB buffer (-B, in KiB): with the default
    2 MiB, a busy 2-core machine that kept tcpdump off the CPU for a moment dropped 16 of 488 packets,
    and a dropped packet is one the secret check never reads."""
    argv = [str(TCPDUMP), "-i", interface, "-s", "0", "-B", "65536", "--immediate-mode", "-U"]
    argv += ["-w", str(pcap)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(proc, log, lambda: "listening on" in log.read_text(), 30, "tcpdump listening")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


@dataclass
class Deployment:
    lab: netns.Lab
    work: Path
    ca: CA
    client: Pair
    gateway: GatewayRun
    tcpdump: subprocess.Popen[bytes]
    pcap: Path

    def stop_capture(self) -> bytes:
        """The whole capture, once tcpdump has stopped and says it kept every packet the filter saw."""
        if self.tcpdump.poll() is None:
            self.tcpdump.send_signal(signal.SIGINT)
            self.tcpdump.wait(30)
        report = (self.work / "tcpdump.log").read_text()
        captured = re.search(r"^(\d+) packets captured$", report, re.M)
        received = re.search(r"^(\d+) packets received by filter$", report, re.M)
        assert captured and received and captured[1] == received[1], report
        assert re.search(r"^0 packets dropped by kernel$", report, re.M), report
        return self.pcap.read_bytes()


def _host_ready(work: Path, name: str, proc: subprocess.Popen[bytes]) -> bool:
    state = read_state(work / f"run-{name}")
    if state is None or not state.get("running") or state.get("pid") != proc.pid:
        return False
    return all(r["state"] == "ready" for r in state["replicas"]) and state["nginx"]["ready"] == 1


@pytest.fixture(scope="module")
def deployment(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("netns-tls")
    _private(work / "peer.secret", SECRET + "\n")
    _private(work / "keys.txt", KEY + "\n")
    ca = make_ca(work / "pki")
    client = ca.issue(work / "pki", "gateway", ["gateway"], client=True)
    with netns.hosts(["a", "b"]) as lab, contextlib.ExitStack() as stack:
        pcap = work / "bridge.pcap"
        tcpdump = stack.enter_context(_capture(lab.net.bridge, pcap, work / "tcpdump.log"))
        procs = {}
        for host in lab.net.hosts:
            pair = ca.issue(work / "pki", f"host-{host.name}", [TLS_NAME, host.addr])
            config = _host_config(work, host, tiny_model_dir, ca, pair)
            log = work / f"up-{host.name}.log"
            procs[host.name] = (
                stack.enter_context(started(host.argv(cli("up", "--config", str(config))), log=log)),
                log,
            )
        for name, (proc, log) in procs.items():
            wait_until(
                proc,
                log,
                functools.partial(_host_ready, work, name, proc),
                START_TIMEOUT_S,
                f"host {name} ready",
            )
        (port,) = free_ports(1)
        run_dir, log = work / "run-gateway", work / "gateway.log"
        argv = cli(
            "gateway", "--inventory", str(_inventory(work, lab, ca, client, port)), "--run-dir", str(run_dir)
        )
        gateway = GatewayRun(stack.enter_context(started(argv, log=log)), run_dir, port, log)
        wait_until(gateway.proc, log, gateway.all_ready, 60, "both hosts' replicas ready at the front")
        yield Deployment(lab, work, ca, client, gateway, tcpdump, pcap)


def _context(ca: CA, client: Pair | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    return context


def test_a_host_refuses_a_caller_without_the_gateways_client_certificate(deployment: Deployment) -> None:
    d = deployment
    addr = d.lab.host("a").addr
    url = f"https://{addr}:{REPLICA_PORT}/health"
    headers = {"X-Hunyuan-Peer": SECRET}
    # The same CA, the secret, no client certificate: the replica answers 403 and hangs up.
    refused = httpx.get(url, headers=headers, verify=_context(d.ca, None), trust_env=False, timeout=10)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "client_certificate_required"
    # A client certificate of another CA does not get through the handshake.
    rogue_ca = make_ca(d.work / "rogue", "rogue")
    rogue = rogue_ca.issue(d.work / "rogue", "intruder", ["intruder"], client=True)
    context = _context(d.ca, None)
    context.load_cert_chain(rogue.cert, rogue.key)
    with pytest.raises(httpx.HTTPError):
        httpx.get(url, headers=headers, verify=context, trust_env=False, timeout=10)
    # Plain HTTP to the replica's port is no way around it (sent without the secret: it would be on the
    # wire in clear, which the capture must not hold).
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{addr}:{REPLICA_PORT}/health", trust_env=False, timeout=10)
    # The gateway's certificate is let in.
    allowed = httpx.get(url, headers=headers, verify=_context(d.ca, d.client), trust_env=False, timeout=10)
    assert allowed.status_code == 200, allowed.text


def _ports(pcap: Path) -> set[int]:
    """The destination ports of the captured TCP packets, as tcpdump reads the file back."""
    argv = [str(TCPDUMP), "-r", str(pcap), "-nn", "tcp"]
    lines = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    # "12:00:00.000 IP 10.77.0.1.48332 > 10.77.0.10.8101: Flags [P.], ..."
    return {
        int(line.split(" > ", 1)[1].split(":", 1)[0].rsplit(".", 1)[1]) for line in lines if " > " in line
    }


def test_a_hosts_own_status_reads_its_tls_replicas(deployment: Deployment) -> None:
    host = deployment.lab.host("a")
    argv = cli("status", "--run-dir", str(deployment.work / "run-a"), "--json")
    shown = subprocess.run(host.argv(argv), capture_output=True, text=True, timeout=60)
    (replica,) = json.loads(shown.stdout)["replicas"]
    # Its /metrics answered over TLS without a client certificate: the gauge is a number, not unknown.
    assert replica["state"] == "ready" and replica["in_flight"] is not None, replica


def _translate(client: httpx.Client, i: int) -> tuple[int, str]:
    body = {"text": f"{SOURCE}, line {i}", "source_lang": "en", "target_lang": "zh"}
    response = client.post("/translate", json=body, headers={"Authorization": f"Bearer {KEY}"})
    return response.status_code, response.text[:200]


def test_every_request_over_mutual_tls_succeeds_and_the_wire_holds_nothing_in_clear(
    deployment: Deployment,
) -> None:
    d = deployment
    with (
        httpx.Client(base_url=d.gateway.url, trust_env=False, timeout=60) as client,
        concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool,
    ):
        outcomes = list(pool.map(lambda i: _translate(client, i), range(REQUESTS)))
    failed = [o for o in outcomes if o[0] != 200]
    assert failed == [], failed[:5]
    served_by = {e.get("upstream_addr") for e in d.gateway.access_log() if e.get("status") in (200, "200")}
    assert {f"{h.addr}:{REPLICA_PORT}" for h in d.lab.net.hosts} <= served_by, served_by
    wire = d.stop_capture()
    # The capture saw the hops: to each replica's port and each host's TLS port, and the replicas'
    # name in the TLS hellos (SNI is sent in clear).
    assert TLS_NAME.encode() in wire
    seen = _ports(d.pcap)
    assert {REPLICA_PORT, HOST_TLS_PORT} <= seen, seen
    for secret in (SECRET, KEY, SOURCE, "Quarterly-ledger"):
        assert secret.encode() not in wire, f"{secret!r} is on the wire in clear"
