"""The Content-Type of an asset, as wrangler dev's asset server gives it.

`RECORDED` holds what wrangler dev 4.164 answered for each of these extensions (None: no
Content-Type at all). Any other extension takes Python's built-in table, read without the
host's /etc/mime.types so the answer does not depend on the machine; one that neither knows
gets no Content-Type, as there. Only `text/*` types carry `; charset=utf-8` (JSON, SVG and
XML do not).
"""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

RECORDED: dict[str, str | None] = {
    "apk": "application/vnd.android.package-archive",
    "apng": "image/apng",
    "asp": None,
    "atom": "application/atom+xml",
    "avi": "video/x-msvideo",
    "avif": "image/avif",
    "bin": "application/octet-stream",
    "bmp": "image/bmp",
    "br": None,
    "cjs": "application/node",
    "coffee": "text/coffeescript",
    "css": "text/css",
    "csv": "text/csv",
    "dat": None,
    "dmg": "application/octet-stream",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "dtd": "application/xml-dtd",
    "eot": "application/vnd.ms-fontobject",
    "epub": "application/epub+zip",
    "exe": "application/octet-stream",
    "flac": "audio/x-flac",
    "geojson": "application/geo+json",
    "gif": "image/gif",
    "glb": "model/gltf-binary",
    "gltf": "model/gltf+json",
    "go": None,
    "gz": "application/gzip",
    "heic": "image/heic",
    "heif": "image/heif",
    "htm": "text/html",
    "html": "text/html",
    "ico": "image/vnd.microsoft.icon",
    "ics": "text/calendar",
    "ini": "text/plain",
    "jar": "application/java-archive",
    "jpeg": "image/jpeg",
    "jpg": "image/jpeg",
    "js": "text/javascript",
    "json": "application/json",
    "jsonld": "application/ld+json",
    "jsx": "text/jsx",
    "jxl": "image/jxl",
    "less": "text/less",
    "m3u8": "application/vnd.apple.mpegurl",
    "m4a": "audio/mp4",
    "manifest": "text/cache-manifest",
    "map": "application/json",
    "md": "text/markdown",
    "mjs": "text/javascript",
    "mkv": "video/x-matroska",
    "mov": "video/quicktime",
    "mp3": "audio/mpeg",
    "mp4": "video/mp4",
    "mpd": "application/dash+xml",
    "obj": "model/obj",
    "oga": "audio/ogg",
    "ogg": "audio/ogg",
    "ogv": "video/ogg",
    "otf": "font/otf",
    "pdf": "application/pdf",
    "php": "application/x-httpd-php",
    "png": "image/png",
    "ppt": "application/vnd.ms-powerpoint",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "py": None,
    "rb": None,
    "rs": "application/rls-services+xml",
    "rss": "application/rss+xml",
    "rtf": "application/rtf",
    "sass": "text/x-sass",
    "scss": "text/x-scss",
    "sh": "application/x-sh",
    "srt": "application/x-subrip",
    "stl": "model/stl",
    "svg": "image/svg+xml",
    "swf": "application/x-shockwave-flash",
    "tar": "application/x-tar",
    "tif": "image/tiff",
    "tiff": "image/tiff",
    "toml": "application/toml",
    "ts": "video/mp2t",
    "tsv": "text/tab-separated-values",
    "tsx": None,
    "ttf": "font/ttf",
    "txt": "text/plain",
    "vcf": "text/x-vcard",
    "vtt": "text/vtt",
    "vue": None,
    "wasm": "application/wasm",
    "wav": "audio/wav",
    "webm": "video/webm",
    "webmanifest": "application/manifest+json",
    "webp": "image/webp",
    "woff": "font/woff",
    "woff2": "font/woff2",
    "xhtml": "application/xhtml+xml",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xml": "application/xml",
    "xsd": "application/xml",
    "xsl": "application/xml",
    "yaml": "text/yaml",
    "yml": "text/yaml",
    "zip": "application/zip",
}

_BUILT_IN = mimetypes.MimeTypes()


def content_type(name: str) -> str | None:
    """The Content-Type for the file `name` (None: send none)."""
    suffix = PurePosixPath(name).suffix.lower()
    if not suffix:
        return None
    extension = suffix[1:]
    found = RECORDED[extension] if extension in RECORDED else _BUILT_IN.guess_type(name)[0]
    if found is None:
        return None
    return f"{found}; charset=utf-8" if found.startswith("text/") else found
