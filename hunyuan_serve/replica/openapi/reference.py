"""The API reference page at /docs: Swagger UI from its Python package, served here (no CDN to reach)."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

from hunyuan_serve.edge.dialects import REFERENCE_ASSETS, REFERENCE_PAGE, REFERENCE_SCHEMA
from hunyuan_serve.replica.openapi.operations import Operations

router = APIRouter(include_in_schema=False)
# The files the page loads (swagger-ui-bundle-v2's copy of swagger-ui-dist); nothing else is served.
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def assets_dir() -> Path:
    import swagger_ui_bundle  # the wheel's vendored swagger-ui-dist

    return Path(swagger_ui_bundle.swagger_ui_path)


@router.get(REFERENCE_PAGE)
async def page() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=REFERENCE_SCHEMA,
        title="hunyuan-serve API reference",
        swagger_js_url=REFERENCE_ASSETS + "swagger-ui-bundle.js",
        swagger_css_url=REFERENCE_ASSETS + "swagger-ui.css",
        swagger_favicon_url=REFERENCE_ASSETS + "favicon-32x32.png",
    )


@router.get(REFERENCE_ASSETS + "{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        raise HTTPException(404, f"no such file: {name[:100]}")
    path = assets_dir() / name
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    headers = {"Cache-Control": "public, max-age=86400"}
    return Response(path.read_bytes(), media_type=kind, headers=headers)


# What the app mounts; the OpenAPI document leaves the page and its files out (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {}
