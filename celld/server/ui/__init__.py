"""The operator page at /cdn-cgi/celld/: plain HTML, CSS and one script, no build step.

The page speaks the local explorer API (celld.server.explorer), the same one wrangler's
CLI uses, so what it shows and does is what the CLI shows and does; live.js adds queues and
WebSocket-holding objects from celld's own routes (celld.server.live_parts), which
`celld queues list` reads too.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

HERE = Path(__file__).resolve().parent
PAGE = "/cdn-cgi/celld/"
ASSETS = {"app.js": "text/javascript", "live.js": "text/javascript", "style.css": "text/css"}
HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
}


def ui_routes() -> list[Route]:
    async def page(request: Request) -> Response:
        return FileResponse(HERE / "index.html", media_type="text/html", headers=HEADERS)

    async def to_page(request: Request) -> Response:
        return RedirectResponse(PAGE, status_code=308)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:  # a fixed list: nothing else on disk can be read
            return Response("not found", status_code=404)
        return FileResponse(HERE / name, media_type=ASSETS[name], headers=HEADERS)

    return [
        Route(PAGE, page, methods=["GET"]),
        Route(PAGE.rstrip("/"), to_page, methods=["GET"]),
        Route(f"{PAGE}ui/{{name}}", asset, methods=["GET"]),
    ]
