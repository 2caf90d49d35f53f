"""The deepl client, unchanged, against the real stack (`up`: Nginx + two vLLM replicas on a tiny hy-mt1.5
checkpoint, which has a terminology prompt: the keyed shared stack of tests/support/shared_stack.py) with
two keys of its keys file: glossaries owned per key, the
terms fed into the prompt, usage summed across both replicas in the shared store, a quota that holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import deepl
import httpx
import pytest

from hunyuan_serve import auth
from hunyuan_serve.replica.usage import key_label
from tests.support.shared_stack import KEYED_REPLICAS, KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

OWNER = KEYS["deepl-owner"].secret
LIMITED = KEYS["deepl-limited"].secret
LIMIT = KEYS["deepl-limited"].quota()
TEXT = "Sentence"  # 8 characters: four of them are 32, under LIMIT; a fifth of 9 would pass it


@dataclass
class Stack:
    url: str
    run: Path
    replica_ports: tuple[int, int]

    def client(self, key: str) -> deepl.Translator:
        return deepl.Translator(key, server_url=self.url, send_platform_info=False)

    def access_lines(self) -> list[dict[str, object]]:
        lines = []
        for log in sorted(self.run.glob("logs/replica-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if line.startswith("{") and '"request_id"' in line:
                    lines.append(json.loads(line))
        return lines


@pytest.fixture(scope="module")
def stack(keyed_stack: SharedStack) -> Stack:
    assert KEYED_REPLICAS == 2, "the quota test needs two replicas"
    return Stack(keyed_stack.url, keyed_stack.run_dir, (keyed_stack.base_port, keyed_stack.base_port + 1))


def test_glossaries_are_owned_per_key_and_fed_into_the_prompt(stack: Stack) -> None:
    owner, other = stack.client(OWNER), stack.client(LIMITED)
    terms = {"Hello": "Hallo", "printer": "Drucker"}
    made = owner.create_glossary("Product", "EN", "DE", terms)
    assert made.entry_count == 2 and owner.get_glossary_entries(made) == terms
    result = owner.translate_text("Hello world", source_lang="EN", target_lang="DE", glossary=made)
    assert isinstance(result.text, str)
    fed = [line for line in stack.access_lines() if line.get("glossary_id") == made.glossary_id]
    assert fed and fed[-1]["glossary_terms"] == 1 and fed[-1]["status"] == 200  # "Hello" only
    assert [g.glossary_id for g in owner.list_glossaries()] == [made.glossary_id]
    assert other.list_glossaries() == []  # the other key does not see it, on either replica
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.get_glossary(made.glossary_id)
    usage = owner.get_usage().character
    assert usage.count == len("Hello world") and not usage.limit_reached
    # A bad glossary: the client's exception, and nothing stored.
    with pytest.raises(deepl.DeepLException, match="duplicates the source term"):
        owner.create_glossary_from_csv("dup", "EN", "DE", "ink,Tinte\nink,Farbe\n")
    with pytest.raises(deepl.DeepLException, match="is empty"):
        owner.create_glossary_from_csv("empty", "EN", "DE", "ink,\n")
    assert [g.glossary_id for g in owner.list_glossaries()] == [made.glossary_id]
    owner.delete_glossary(made)
    assert owner.list_glossaries() == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        owner.get_glossary(made.glossary_id)


def test_a_quota_counts_across_both_replicas(stack: Stack) -> None:
    limited = stack.client(LIMITED)
    assert (limited.get_usage().character.count, limited.get_usage().character.limit) == (0, LIMIT)
    for _ in range(4):  # Nginx's least_conn takes idle replicas in turn: two each
        limited.translate_text(TEXT, source_lang="EN", target_lang="DE")
    assert limited.get_usage().character.count == 4 * len(TEXT)
    label = key_label(auth.key_id(LIMITED))
    counted = [_counted(port, label) for port in stack.replica_ports]
    assert all(counted) and sum(counted) == 4 * len(TEXT), counted  # each replica did some of the work
    # Each replica alone has counted under LIMIT - 9; only the shared sum refuses the next 9 characters.
    assert all(each + 9 <= LIMIT for each in counted)
    with pytest.raises(deepl.QuotaExceededException):
        limited.translate_text(TEXT + "s", source_lang="EN", target_lang="DE")
    assert limited.get_usage().character.count == 4 * len(TEXT)
    logs = [*stack.run.glob("nginx/logs/*.log"), *stack.run.glob("logs/*.log")]
    texts = [p.read_text(errors="replace") for p in logs]
    assert texts and not [t for t in texts if OWNER in t or LIMITED in t]  # no key in any log


def _counted(port: int, label: str) -> int:
    """The characters one replica counted for the key, from its own /metrics (read direct, no key)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False, timeout=10).text
    prefix = f'hunyuan_key_characters_total{{key="{label}"}} '
    found = [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]
    return int(float(found[0])) if found else 0
