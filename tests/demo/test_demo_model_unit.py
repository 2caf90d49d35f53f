"""Pure parts of the demo-model conversion: cache location, completeness, the <bos> fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.demo_model import (
    BOS_ID,
    DONE_MARKER,
    END_OF_TURN,
    LAYOUT_VERSION,
    add_end_of_turn_stop,
    default_models_dir,
    fix_bos,
    is_complete,
    layout_version,
)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_CACHE_HOME": "/x/cache"}, Path("/x/cache/hunyuan-serve/models")),
        ({}, Path.home() / ".cache" / "hunyuan-serve" / "models"),
        ({"XDG_CACHE_HOME": ""}, Path.home() / ".cache" / "hunyuan-serve" / "models"),
    ],
)
def test_default_models_dir(environ: dict[str, str], expected: Path) -> None:
    assert default_models_dir(environ) == expected


def test_is_complete_needs_marker_of_this_layout_and_weights(tmp_path: Path) -> None:
    assert not is_complete(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert not is_complete(tmp_path)  # an interrupted conversion writes no marker
    (tmp_path / DONE_MARKER).write_text("{}")
    assert layout_version(tmp_path) == 1 and not is_complete(tmp_path)  # converted before versions
    (tmp_path / DONE_MARKER).write_text(json.dumps({"version": LAYOUT_VERSION}))
    assert layout_version(tmp_path) == LAYOUT_VERSION and is_complete(tmp_path)
    (tmp_path / DONE_MARKER).write_text("not json")
    assert layout_version(tmp_path) == 0 and not is_complete(tmp_path)


def test_end_of_turn_is_listed_beside_eos_once(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": BOS_ID, "<unk>": 3, END_OF_TURN: 106}
    Tokenizer(models.WordLevel(vocab, unk_token="<unk>")).save(str(tmp_path / "tokenizer.json"))
    config = tmp_path / "generation_config.json"
    config.write_text(json.dumps({"bos_token_id": BOS_ID, "eos_token_id": 1}))
    add_end_of_turn_stop(config)
    add_end_of_turn_stop(config)  # a second pass (an interrupted upgrade run again) adds nothing
    assert json.loads(config.read_text()) == {"bos_token_id": BOS_ID, "eos_token_id": [1, 106]}


def test_fix_bos_makes_the_tokenizer_prepend_bos(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": BOS_ID, "<unk>": 3, "Hi": 4, "there": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert Tokenizer.from_file(str(path)).encode("Hi there").ids == [4, 5]

    fix_bos(path)
    fixed = Tokenizer.from_file(str(path))
    assert fixed.encode("Hi there").ids == [BOS_ID, 4, 5]
    assert fixed.encode("Hi", "there").ids == [BOS_ID, 4, 5]
    assert fixed.encode("Hi there", add_special_tokens=False).ids == [4, 5]
    assert json.loads(path.read_text())["post_processor"]["type"] == "TemplateProcessing"
