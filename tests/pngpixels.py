"""Read the pixels of a PNG screenshot (8-bit RGB or RGBA, not interlaced), for tests.

Chromium's screenshots are exactly that format; a screenshot check needs nothing more,
so this avoids a dependency on an image library for about forty lines.
"""

from __future__ import annotations

import struct
import zlib


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows): each row is width * 3 bytes of RGB."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    offset = 8
    idat = b""
    width = height = channels = 0
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, color {color}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        previous = line
        rgb = bytes(line) if channels == 3 else bytes(b for j, b in enumerate(line) if j % 4 != 3)
        rows.append(rgb)
    return width, height, rows


def columns_with(rows: list[bytes], color: tuple[int, int, int], tolerance: int = 12) -> set[int]:
    """The x of every column holding a pixel within `tolerance` of `color`."""
    found: set[int] = set()
    for row in rows:
        for x in range(len(row) // 3):
            r, g, b = row[3 * x], row[3 * x + 1], row[3 * x + 2]
            if (
                abs(r - color[0]) <= tolerance
                and abs(g - color[1]) <= tolerance
                and abs(b - color[2]) <= tolerance
            ):
                found.add(x)
    return found
