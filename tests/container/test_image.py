"""The CPU image, built and run as a user would: the tiny checkpoint mounted read-only, a read-only root,
its own non-root user, the keys file as a mounted secret; the real openai client and curl through the
published port, a replica killed inside, a kill and a restart on the run-dir volume, `podman stop`.
Bad input: each refusal exits non-zero within its deadline and names the cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import deepl
import httpx
import openai
import pytest

from tests.support import podman
from tests.support.podman import KEY

# The first test of a cold cache waits for the image build (about 4 min here) in its setup.
pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]


CHECKPOINT = "/models/hunyuan-mt-tiny"  # named like its generation: the prompt family is read from it
SECRET = "/run/secrets/hunyuan-serve-keys"
UID = 10001  # the image's user (deploy/container/Containerfile)
GRACE_S = 60
READY_S = 600
SEGMENTS = 300


@dataclass
class Served:
    name: str
    port: int
    run_volume: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def status(self) -> dict[str, object]:
        answer: dict[str, object] = json.loads(podman.exec_in(self.name, "hunyuan-serve", "status", "--json"))
        return answer


def serve_command(port: int) -> list[str]:
    return [
        "up", "--nginx-listen", "0.0.0.0", "--model", CHECKPOINT, "--keys-file", SECRET,
        "--dtype", "float32", "--kv-cache-memory-bytes", str(128 << 20), "--max-tokens", "4",
        "--document-batch-size", "1", "--document-concurrency", "1",
    ]  # fmt: skip


def wait_ready(served: Served, deadline_s: float = READY_S) -> float:
    """Seconds until the front answers /health 200 and a replica is ready behind it."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        state = podman.run(["inspect", served.name, "--format", "{{.State.Status}}"], check=False).stdout
        logs = podman.run(["logs", served.name], check=False)
        problem = (
            state.strip() not in ("running", "created", "configured")
            or '"to": "failed"' in logs.stdout + logs.stderr
        )
        assert not problem, f"{state.strip()}: {logs.stdout[-3000:]} {logs.stderr[-3000:]}"
        try:
            if httpx.get(served.url + "/health", timeout=5, trust_env=False).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise AssertionError(f"not ready in {deadline_s} s: {podman.run(['logs', served.name]).stderr[-3000:]}")


@pytest.fixture(scope="module")
def served(image: str, checkpoint: Path, keys: Path) -> Iterator[Served]:
    port = podman.free_port()
    name, run_volume, cache_volume = "hs-image-test", "hs-image-test-run", "hs-image-test-cache"
    podman.remove(name)
    podman.remove_volumes(run_volume, cache_volume)
    volumes = [
        f"{checkpoint}:{CHECKPOINT}:ro",
        f"{keys}:{SECRET}:ro",
        f"{run_volume}:/var/lib/hunyuan-serve",
        f"{cache_volume}:/var/cache/hunyuan-serve",
    ]
    flags = [
        "-p",
        f"127.0.0.1:{port}:8080",
        "-e",
        "HUNYUAN_SERVE_TEST_IGNORE_EOS=1",
        "--stop-timeout",
        str(GRACE_S),
    ]
    podman.container_run(name, volumes, serve_command(port), flags)
    served = Served(name, port, run_volume)
    print(f"container start to ready: {wait_ready(served):.1f} s")
    yield served
    podman.remove(name)
    podman.remove_volumes(run_volume, cache_volume)


def test_runs_as_its_own_user_on_a_read_only_root(served: Served) -> None:
    assert podman.exec_in(served.name, "id", "-u").strip() == str(UID)
    refused = podman.run(["exec", served.name, "touch", "/opt/hunyuan-serve/x"], check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr


def test_the_openai_client_and_curl_answer_through_the_published_port(served: Served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
    with client:
        (model,) = client.models.list().data
        # The checkpoint's directory name, not its path in the container.
        assert model.id == "hunyuan-mt-tiny"
        answer = client.chat.completions.create(
            model=model.id, messages=[{"role": "user", "content": "Translate into Chinese: Hello"}]
        )
    assert answer.model == "hunyuan-mt-tiny" and answer.choices[0].message.content
    body = json.dumps({"text": "Hello", "source_lang": "en", "target_lang": "zh"})
    curl = subprocess.run(
        ["curl", "-fsS", "-H", f"Authorization: Bearer {KEY}", "-H", "Content-Type: application/json",
         "-d", body, served.url + "/translate"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert curl.returncode == 0, curl.stderr
    assert json.loads(curl.stdout)["target_lang"] == "zh"
    refused = httpx.post(served.url + "/translate", content=body, timeout=30, trust_env=False)
    assert refused.status_code == 401


def test_the_path_stays_in_status_for_operators(served: Served) -> None:
    status = served.status()
    assert CHECKPOINT in json.dumps(status)


def test_the_images_healthcheck_passes(served: Served) -> None:
    # Run by hand: podman schedules healthchecks with systemd timers, which this machine has not.
    assert podman.run(["healthcheck", "run", served.name], check=False).returncode == 0


def replica_pid(served: Served) -> int | None:
    replicas = served.status().get("replicas") or []
    assert isinstance(replicas, list)
    ready = [r for r in replicas if r.get("state") == "ready" and r.get("pid")]
    return int(ready[0]["pid"]) if ready else None


def test_a_replica_killed_inside_is_evicted_and_restarted(served: Served) -> None:
    pid = replica_pid(served)
    assert pid is not None
    podman.exec_in(served.name, "sh", "-c", f"kill -9 {pid}")  # the shell's kill: the image has no procps
    deadline = time.monotonic() + READY_S
    while (now := replica_pid(served)) in (None, pid):
        assert time.monotonic() < deadline, served.status()
        time.sleep(1)
    events = podman.exec_in(served.name, "cat", "/var/lib/hunyuan-serve/run/events.jsonl")
    assert f'"pid": {pid}, "returncode": -9' in events
    assert httpx.get(served.url + "/health", timeout=10, trust_env=False).status_code == 200
    assert now != pid


def start_document(served: Served, tmp_path: Path) -> tuple[str, str]:
    source = tmp_path / "notes.md"
    source.write_text("".join(f"Paragraph number {i} of the notes.\n\n" for i in range(SEGMENTS)))
    with source.open("rb") as upload:
        answer = httpx.post(
            served.url + "/v2/document", headers={"Authorization": f"DeepL-Auth-Key {KEY}"},
            files={"file": ("notes.md", upload, "text/markdown")},
            data={"target_lang": "DE", "source_lang": "EN"}, timeout=60, trust_env=False,
        )  # fmt: skip
    assert answer.status_code == 200, answer.text
    job = answer.json()
    return job["document_id"], job["document_key"]


def document_status(served: Served, job: tuple[str, str]) -> dict[str, object]:
    answer = httpx.post(
        f"{served.url}/v2/document/{job[0]}", headers={"Authorization": f"DeepL-Auth-Key {KEY}"},
        data={"document_key": job[1]}, timeout=30, trust_env=False,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    status: dict[str, object] = answer.json()
    return status


def test_glossary_usage_and_a_document_job_survive_a_kill_and_a_restart(
    served: Served, tmp_path: Path
) -> None:
    translator = deepl.Translator(KEY, server_url=served.url)
    glossary = translator.create_glossary("UI", "EN", "ZH", {"printer": "打印机"})
    translator.translate_text("Restart the printer", source_lang="EN", target_lang="ZH")
    used = translator.get_usage().character.count
    assert used >= len("Restart the printer")
    job = start_document(served, tmp_path)
    deadline = time.monotonic() + READY_S
    while (before := document_status(served, job))["status"] == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # Killed mid-job: the job must be picked up again from the volume, not lost.
    assert before["status"] == "translating", before
    podman.run(["kill", served.name], timeout=60)
    podman.run(["wait", served.name], timeout=120)
    podman.run(["start", served.name], timeout=120)
    wait_ready(served)
    assert translator.get_glossary(glossary.glossary_id).entry_count == 1
    assert translator.get_usage().character.count >= used
    while (after := document_status(served, job))["status"] != "done":
        assert after["status"] in ("queued", "translating") and time.monotonic() < deadline, after
        time.sleep(1)
    result = httpx.post(
        f"{served.url}/v2/document/{job[0]}/result", headers={"Authorization": f"DeepL-Auth-Key {KEY}"},
        data={"document_key": job[1]}, timeout=60, trust_env=False,
    )  # fmt: skip
    assert result.status_code == 200 and result.text.count("\n\n") >= SEGMENTS - 1


def test_stop_drains_exits_0_and_leaves_no_process(served: Served) -> None:
    pids = podman.host_pids(served.name)
    assert len(pids) >= 3  # tini, up, nginx, a replica
    start = time.monotonic()
    podman.run(["stop", "-t", str(GRACE_S), served.name], timeout=GRACE_S + 60)
    took = time.monotonic() - start
    print(f"podman stop: {took:.1f} s")
    state = podman.run(["inspect", served.name, "--format", "{{.State.ExitCode}} {{.State.Status}}"]).stdout
    assert state.split() == ["0", "exited"]
    assert took < GRACE_S, "killed at the end of the grace period, not stopped"
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


@pytest.mark.parametrize("case", ["no model", "unreadable model", "unreadable keys", "run dir not writable"])
def test_bad_input_exits_non_zero_naming_the_cause(
    case: str, image: str, checkpoint: Path, keys: Path, tmp_path: Path
) -> None:
    volumes = [f"{checkpoint}:{CHECKPOINT}:ro", f"{keys}:{SECRET}:ro"]
    command, flags, named = serve_command(0), [], ""
    if case == "no model":
        volumes, command, named = [f"{keys}:{SECRET}:ro"], [], "model /model: no such directory"
    elif case == "unreadable model":
        locked = tmp_path / "hunyuan-mt-tiny"
        shutil.copytree(checkpoint, locked)
        locked.chmod(0o755)
        (locked / "model.safetensors").chmod(0o600)  # root's, as a host's weights often are
        volumes[0], named = (
            f"{locked}:{CHECKPOINT}:ro",
            f"cannot read {CHECKPOINT}/model.safetensors as uid {UID}",
        )
    elif case == "unreadable keys":
        secret = tmp_path / "keys.txt"
        secret.write_text(KEY + "\n")
        secret.chmod(0o600)
        volumes[1], named = f"{secret}:{SECRET}:ro", f"cannot read {SECRET} as uid {UID}"
    else:
        # Without the image's volumes the run dir is on the read-only root.
        flags, named = ["--image-volume", "ignore"], "run dir /var/lib/hunyuan-serve/run must be writable"
    done = podman.container_run(
        f"hs-image-bad-{os.getpid()}", volumes, command, flags, detach=False, timeout=90
    )
    said = done.stderr + done.stdout
    assert done.returncode != 0 and named in said and "Traceback" not in said, said[-2000:]
