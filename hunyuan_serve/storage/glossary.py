"""A DeepL glossary as stored: its dictionaries (one a language pair) and their JSON form."""

from __future__ import annotations

import json
from dataclasses import dataclass

Terms = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Dictionary:
    """One language pair of a glossary (DeepL's name): base codes as DeepL spells them, lowercase."""

    source: str
    target: str
    entries: Terms


@dataclass(frozen=True)
class Glossary:
    """A stored glossary: its id, the key_id that created it (only that key sees it), name, creation time."""

    id: str
    owner: str
    name: str
    created: str  # ISO 8601 in UTC with milliseconds, as DeepL answers creation_time
    dictionaries: tuple[Dictionary, ...]

    def to_json(self) -> str:
        dictionaries = [[d.source, d.target, [list(e) for e in d.entries]] for d in self.dictionaries]
        body = {"id": self.id, "owner": self.owner, "name": self.name, "created": self.created}
        return json.dumps({**body, "dictionaries": dictionaries}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Glossary:
        data = json.loads(text)
        dictionaries = tuple(
            Dictionary(source, target, tuple((s, t) for s, t in entries))
            for source, target, entries in data["dictionaries"]
        )
        return cls(data["id"], data["owner"], data["name"], data["created"], dictionaries)
