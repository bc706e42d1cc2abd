"""Static assets (the `assets` config): which file answers a request, as wrangler dev decides.

Rules, in the order they apply to a GET or HEAD:

1. ``run_worker_first``: ``true`` sends every request to the Worker first; a list of route
   patterns (``*`` matches anything, a leading ``!`` excludes) does so for matching paths.
   The Worker reaches the assets itself through ``env.<binding>.fetch()``.
2. ``html_handling`` maps the path to a file, redirecting (307) to the canonical URL:
   ``auto-trailing-slash`` serves ``/a`` from ``a.html`` and ``/d/`` from ``d/index.html``
   (``/a.html``, ``/a/``, ``/d``, ``/d/index.html`` redirect there); ``force-trailing-slash``
   makes every HTML URL end in ``/``; ``drop-trailing-slash`` makes none end in ``/``;
   ``none`` serves exact file names only.
3. No file: ``404-page`` serves the nearest ``404.html`` up the tree with status 404;
   ``single-page-application`` serves ``/index.html`` with 200 (from compatibility date
   2025-04-01 only to navigations, ``Sec-Fetch-Mode: navigate``: other requests go to the
   Worker, as ``wrangler dev`` routes them); otherwise the request goes to the Worker (or,
   from ``env.ASSETS.fetch()``, gets an empty 404).

A request the assets would answer (a file, a redirect or a not-found page) with a method
other than GET or HEAD gets 405. ``env.ASSETS.fetch()`` serves the file a redirect would lead to
instead of the redirect, and a path spelled with needless escapes (``/%61bout``) is redirected
to its plain form.

Files are read on a thread. Responses carry a strong ETag (from the content) and answer a
matching ``If-None-Match`` with 304, and ``Cache-Control: public, max-age=0, must-revalidate``.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import hashlib
import posixpath
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from celld.bindings.mime import content_type
from celld.project.bindings import AssetsConfig

CACHE_CONTROL = "public, max-age=0, must-revalidate"
# Characters a path keeps unescaped; a request spelled otherwise is redirected to this form.
_PATH_SAFE = "/!$&'()*+,;=:@-._~"


@dataclass
class AssetAnswer:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    #: The length a GET would send; a HEAD answer has no body but reports it.
    length: int | None = None

    @property
    def content_length(self) -> int:
        return len(self.body) if self.length is None else self.length


@dataclass(frozen=True)
class _Match:
    file: str | None = None
    redirect: str | None = None


class AssetServer:
    def __init__(self, config: AssetsConfig) -> None:
        self.config = config
        self.root = config.directory

    # -- deciding ---------------------------------------------------------------------------

    def worker_first(self, path: str) -> bool:
        rule = self.config.run_worker_first
        if isinstance(rule, bool):
            return rule
        included = any(fnmatch.fnmatchcase(path, p) for p in rule if not p.startswith("!"))
        excluded = any(fnmatch.fnmatchcase(path, p[1:]) for p in rule if p.startswith("!"))
        return included and not excluded

    def _exists(self, relative: str) -> bool:
        if not relative or relative.startswith("/") or ".." in relative.split("/"):
            return False
        try:
            target = (self.root / relative).resolve()
            return target.is_file() and target.is_relative_to(self.root)
        except (OSError, ValueError):
            # A name no file can have (a NUL from "%00", a name over the file system's
            # length limit) is no asset: the request goes on as for any missing file.
            return False

    def resolve(self, path: str) -> _Match | None:
        """The file for `path` or the URL to redirect to, under html_handling."""
        rel = path.lstrip("/")
        mode = self.config.html_handling
        if mode == "none":
            return _Match(file=rel) if self._exists(rel) else None
        trailing = path.endswith("/")
        base = rel.rstrip("/")
        # Explicit .html / index.html names redirect to the pretty URL.
        if (
            base.endswith("/index.html")
            or base == "index.html"
            or base.endswith("/index")
            or base == "index"
        ):
            folder = base.rsplit("index", 1)[0].rstrip(".")
            folder = folder[:-1] if folder.endswith("/") else folder
            if self._exists(posixpath.join(folder, "index.html")):
                return _Match(redirect=self._pretty(folder, folder=True))
        if base.endswith(".html") and self._exists(base) and not trailing:
            stem = base[: -len(".html")]
            return _Match(redirect=self._pretty(stem, folder=False))
        if trailing or not base:
            index = posixpath.join(base, "index.html") if base else "index.html"
            if self._exists(index):
                want = self._pretty(base, folder=True)
                return _Match(file=index) if want == path else _Match(redirect=want)
            if base and self._exists(base + ".html"):
                want = self._pretty(base, folder=False)
                return _Match(file=base + ".html") if want == path else _Match(redirect=want)
            return None
        if self._exists(base) and not base.endswith(".html"):
            return _Match(file=base)
        if self._exists(base + ".html"):
            want = self._pretty(base, folder=False)
            return _Match(file=base + ".html") if want == path else _Match(redirect=want)
        if self._exists(posixpath.join(base, "index.html")):
            want = self._pretty(base, folder=True)
            return (
                _Match(file=posixpath.join(base, "index.html"))
                if want == path
                else _Match(redirect=want)
            )
        return None

    def _pretty(self, stem: str, *, folder: bool) -> str:
        mode = self.config.html_handling
        stem = "/" + stem if stem else ""
        if mode == "drop-trailing-slash":
            return stem or "/"
        if mode == "force-trailing-slash":
            return stem + "/"
        return stem + "/" if folder else (stem or "/")

    def _not_found_file(self, path: str) -> tuple[str, int] | None:
        mode = self.config.not_found_handling
        if mode == "404-page":
            folder = posixpath.dirname(path.lstrip("/").rstrip("/") + "/x")
            while True:
                candidate = posixpath.join(folder, "404.html") if folder else "404.html"
                if self._exists(candidate):
                    return candidate, 404
                if not folder:
                    return None
                folder = posixpath.dirname(folder)
        if mode == "single-page-application" and self._exists("index.html"):
            return "index.html", 200
        return None

    # -- answering --------------------------------------------------------------------------

    async def answer(
        self, method: str, url: str, headers: dict[str, str], *, from_worker: bool
    ) -> AssetAnswer | None:
        """The asset response, or None when the request belongs to the Worker."""
        parts = urlsplit(url)
        raw_path = parts.path or "/"
        path = unquote(raw_path)
        if not from_worker and self.worker_first(path):
            return None
        match = self.resolve(path)
        if from_worker:
            # The binding serves what a redirect would lead to, without the redirect.
            for _ in range(3):
                if match is None or match.redirect is None:
                    break
                match = self.resolve(match.redirect)
        status = 200
        file = match.file if match else None
        if match is None:
            fallback = self._not_found_file(path)
            if (
                fallback is not None
                and not from_worker
                and self.config.navigation_only_spa
                and self.config.not_found_handling == "single-page-application"
                and headers.get("sec-fetch-mode") != "navigate"
            ):
                fallback = None  # only navigations get the app's index.html
            if fallback is None:
                worker_next = not from_worker and not self.config.assets_only
                return None if worker_next else AssetAnswer(404)
            file, status = fallback
        # A request the assets would answer, but not with GET or HEAD.
        if method not in ("GET", "HEAD"):
            return AssetAnswer(405)
        if match is not None and match.redirect is not None:
            location = match.redirect + (f"?{parts.query}" if parts.query else "")
            return AssetAnswer(307, [("location", location)])
        canonical = quote(path, safe=_PATH_SAFE)
        if not from_worker and status == 200 and canonical != raw_path:
            location = canonical + (f"?{parts.query}" if parts.query else "")
            return AssetAnswer(307, [("location", location)])
        assert file is not None
        data = await asyncio.to_thread((self.root / file).read_bytes)
        etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        kind = content_type(file)
        out = [
            *((("content-type", kind),) if kind is not None else ()),
            ("etag", etag),
            ("cache-control", CACHE_CONTROL),
        ]
        wanted = {t.strip() for t in headers.get("if-none-match", "").split(",")}
        if status == 200 and etag in wanted:
            return AssetAnswer(304, [("etag", etag), ("cache-control", CACHE_CONTROL)])
        if method == "HEAD":
            return AssetAnswer(status, out, b"", length=len(data))
        return AssetAnswer(status, out, data)

    async def op_fetch(self, message: dict[str, Any]) -> dict[str, Any]:
        """`env.ASSETS.fetch(request)`: the same rules, never falling through to the Worker."""
        headers = {str(k).lower(): str(v) for k, v in message.get("headers") or []}
        answer = await self.answer(
            str(message.get("method") or "GET").upper(),
            str(message.get("url")),
            headers,
            from_worker=True,
        )
        assert answer is not None
        return {
            "status": answer.status,
            "headers": [[k, v] for k, v in answer.headers],
            "body": base64.b64encode(answer.body).decode("ascii"),
        }
