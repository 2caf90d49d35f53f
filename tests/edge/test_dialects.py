"""The APIs' declarations (edge/dialects.py): each route in exactly one, and what each declares holds."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from hunyuan_serve.edge import dialects
from hunyuan_serve.edge.dialects import DIALECTS, NATIVE, Dialect

# An HTTP token (RFC 9110): what a scheme name may hold, and all Nginx's key map may be given unescaped.
TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def test_every_route_is_declared_by_exactly_one_api() -> None:
    counted = Counter(path for dialect in DIALECTS for path in dialect.routes)
    assert [path for path, n in counted.items() if n > 1] == []
    assert set(dialects.ROUTE_METHODS) == set(counted)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_each_route_is_under_its_apis_prefixes_and_found_there(dialect: Dialect) -> None:
    for path in dialect.routes:
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        # Ours is the fallback: the routes of no API's prefix (health, the reference) answer natively.
        assert dialects.dialect_of(concrete) is dialect, path
        if dialect is not NATIVE:
            assert any(concrete.startswith(p) or concrete == p.rstrip("/") for p in dialect.prefixes), path
    assert set(dialect.routed) <= set(dialect.routes)
    assert set(dialect.keys.open) <= set(dialect.routes)


def test_no_two_apis_share_a_prefix() -> None:
    prefixes = [p for dialect in DIALECTS for p in dialect.prefixes]
    assert len(prefixes) == len(set(prefixes))
    assert len({d.name for d in DIALECTS}) == len(DIALECTS)


def test_key_schemes_are_tokens_read_case_blind() -> None:
    assert dialects.KEY_SCHEMES == ("bearer", "deepl-auth-key")
    assert all(TOKEN.fullmatch(scheme) for d in DIALECTS for scheme in d.keys.schemes)


@pytest.mark.parametrize(
    ("dialect", "code", "status", "answered"),
    [
        (dialects.OPENAI, "invalid_request", 422, 400),
        (dialects.OPENAI, "text_too_long", 413, 413),
        (dialects.DEEPL, "invalid_request", 422, 400),
        (dialects.DEEPL, dialects.QUOTA_EXCEEDED, 429, dialects.DEEPL_QUOTA_STATUS),
        (dialects.LIBRETRANSLATE, "text_too_long", 413, 400),
        (dialects.LIBRETRANSLATE, "document_too_large", 413, 413),
        (dialects.LIBRETRANSLATE, dialects.QUOTA_EXCEEDED, 429, 403),
        (dialects.LIBRETRANSLATE, "overloaded", 503, 503),
        (NATIVE, "invalid_request", 422, 422),
        (dialects.IMMERSIVE, dialects.QUOTA_EXCEEDED, 429, 429),
    ],
)
def test_each_api_answers_a_refusal_with_the_status_it_declares(
    dialect: Dialect, code: str, status: int, answered: int
) -> None:
    assert dialect.status_of(code, status) == answered


@pytest.mark.parametrize(
    ("path", "is_open"),
    [
        ("/health", True),
        ("/openapi.json", True),
        ("/docs", True),
        ("/docs/assets/swagger-ui.css", True),
        ("/libretranslate/languages", True),
        ("/languages", False),
        ("/libretranslate/translate", False),
        ("/docs/assets/a/b", False),
        ("/healthz", False),
    ],
)
def test_the_open_routes_are_exactly_those_declared(path: str, is_open: bool) -> None:
    assert dialects.is_open(path) is is_open
