"""Base models without an instruction template (the CPU demo model): a completion prompt of example pairs."""

from __future__ import annotations

from hunyuan_serve.families.base import Features, Prompt
from hunyuan_serve.languages import Language

NAME = "few-shot"
FEATURES: tuple[str, ...] = ()

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
STOP = ("\n",)
# A base model follows no chat: the CPU demo (Gemma 3 270M base) never ends its turn, so a chat that
# named no max_tokens ran to the whole budget (512 tokens: a 504 after 120 s on two busy cores, or the
# prompt repeated 26 times). Such a chat gets at most this many, a sentence or two: 10-40 s there.
CHAT_MAX_TOKENS = 64


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


def build(source: Language, target: Language, text: str, features: Features) -> Prompt:
    del features  # this family has none; build_prompt rejected any before calling
    return Prompt(text=few_shot_text(source, target, text), stop=STOP)
