"""Prompt building per model family: Hunyuan-MT's official chat prompts, or few-shot pairs for base models."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hunyuan_serve.languages import Language, is_chinese

Family = Literal["hunyuan", "few_shot"]

ZH_TEMPLATE = "把下面的文本翻译成{target}，不要额外解释。\n\n{text}"
EN_TEMPLATE = "Translate the following segment into {target}, without additional explanation.\n\n{text}"

# Short UI strings work best as examples for a 270M base model (see the CPU demo-model note): longer
# sentences made it copy them. Same six meanings in each language, so any pair of these lines up.
FEW_SHOT_EXAMPLES: dict[str, tuple[str, ...]] = {
    "en": ("Open file", "Delete", "Seed", "Show preview", "Refresh", "Enable"),
    "zh": ("打开文件", "删除", "种子", "显示预览", "刷新", "启用"),
    "zh-Hant": ("開啟檔案", "刪除", "種子", "顯示預覽", "重新整理", "啟用"),
    "fr": ("Ouvrir le fichier", "Supprimer", "Graine", "Afficher l'aperçu", "Actualiser", "Activer"),
    "de": ("Datei öffnen", "Löschen", "Seed", "Vorschau anzeigen", "Aktualisieren", "Aktivieren"),
    "es": ("Abrir archivo", "Eliminar", "Semilla", "Mostrar vista previa", "Actualizar", "Habilitar"),
    "pt": ("Abrir arquivo", "Excluir", "Semente", "Mostrar pré-visualização", "Atualizar", "Ativar"),
    "it": ("Apri file", "Elimina", "Seed", "Mostra anteprima", "Aggiorna", "Abilita"),
    "ja": ("ファイルを開く", "削除", "シード", "プレビューを表示", "更新", "有効にする"),
    "ko": ("파일 열기", "삭제", "시드", "미리보기 표시", "새로고침", "활성화"),
    "ru": ("Открыть файл", "Удалить", "Сид", "Показать предпросмотр", "Обновить", "Включить"),
}


@dataclass(frozen=True)
class Prompt:
    """What the engine gets: chat messages (rendered by the tokenizer's template) or raw completion text."""

    messages: tuple[dict[str, str], ...] = ()
    text: str = ""
    stop: tuple[str, ...] = ()

    @property
    def is_chat(self) -> bool:
        return bool(self.messages)


def hunyuan_instruction(source: Language, target: Language, text: str) -> str:
    """The model card's user message: Chinese template when zh/zh-Hant is on either side, else English."""
    if is_chinese(source) or is_chinese(target):
        return ZH_TEMPLATE.format(target=target.chinese_name, text=text)
    return EN_TEMPLATE.format(target=target.name, text=text)


def few_shot_text(source: Language, target: Language, text: str) -> str:
    """A completion prompt of example pairs ending in '<Target>:'; zero-shot when a side has no examples."""
    lines: list[str] = []
    src_examples = FEW_SHOT_EXAMPLES.get(source.code)
    tgt_examples = FEW_SHOT_EXAMPLES.get(target.code)
    if src_examples and tgt_examples:
        for src, tgt in zip(src_examples, tgt_examples, strict=True):
            lines.append(f"{source.name}: {src}\n{target.name}: {tgt}\n")
    # Newlines inside the text would end the completion early: the stop string is "\n".
    flat = " ".join(text.split())
    lines.append(f"{source.name}: {flat}\n{target.name}:")
    return "".join(lines)


def build_prompt(family: Family, source: Language, target: Language, text: str) -> Prompt:
    """The prompt for one text in the given family."""
    if family == "hunyuan":
        return Prompt(messages=({"role": "user", "content": hunyuan_instruction(source, target, text)},))
    return Prompt(text=few_shot_text(source, target, text), stop=("\n",))


def family_from_config(setting: str, model_config: Mapping[str, Any]) -> Family:
    """Resolve 'auto' from a checkpoint's config.json: hunyuan* model types get the official prompts."""
    if setting == "hunyuan":
        return "hunyuan"
    if setting == "few_shot":
        return "few_shot"
    if setting != "auto":
        raise ValueError(f"prompt family must be auto, hunyuan or few_shot, got {setting!r}")
    model_type = str(model_config.get("model_type", "")).lower()
    return "hunyuan" if model_type.startswith("hunyuan") else "few_shot"


def read_model_config(model: str) -> dict[str, Any]:
    """config.json of a local checkpoint; for hub ids a guess from the name (no download)."""
    path = Path(model) / "config.json"
    if not path.is_file():
        name = model.lower()
        # A hub id like tencent/Hunyuan-MT-7B has no local config; its name says the family.
        return {"model_type": "hunyuan_v1_dense"} if "hunyuan" in name else {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}
