# ruff: noqa: E501 - the JS snippets read better unwrapped
"""TextEncoder/TextDecoder, atob/btoa and the base64 helpers, in a real isolate."""

from __future__ import annotations

import base64

import pytest

from tests.jsharness import JsError, run_js_async


async def test_utf8_round_trip_including_astral_and_lone_surrogates() -> None:
    result = await run_js_async(
        r"""
        const enc = new TextEncoder();
        const dec = new TextDecoder();
        const s = "h\u00e9\u20ac\u{1F600}";
        return {
          bytes: Array.from(enc.encode(s)),
          back: dec.decode(enc.encode(s)) === s,
          lone: Array.from(enc.encode("a\ud800b")),
          encoding: enc.encoding + "/" + dec.encoding,
          empty: enc.encode().length,
        };
        """
    )
    assert result["bytes"] == list("hé€😀".encode())
    assert result["back"] is True
    assert result["lone"] == [0x61, 0xEF, 0xBF, 0xBD, 0x62]
    assert result["encoding"] == "utf-8/utf-8"
    assert result["empty"] == 0


async def test_decoder_replacement_fatal_bom_and_streaming() -> None:
    result = await run_js_async(
        r"""
        const bad = new Uint8Array([0x61, 0xff, 0xc3]);
        let fatal = null;
        try { new TextDecoder("utf-8", {fatal: true}).decode(bad); } catch (e) { fatal = e.name; }
        const bom = new Uint8Array([0xef, 0xbb, 0xbf, 0x68]);
        const d = new TextDecoder();
        const euro = new TextEncoder().encode("\u20ac\u{1F600}");
        let streamed = "";
        for (const b of euro) streamed += d.decode(new Uint8Array([b]), {stream: true});
        streamed += d.decode();
        return {
          replaced: new TextDecoder().decode(bad),
          fatal,
          bom: new TextDecoder().decode(bom),
          keptBom: new TextDecoder("utf-8", {ignoreBOM: true}).decode(bom).length,
          streamed,
          overlong: new TextDecoder().decode(new Uint8Array([0xc0, 0x80])),
          surrogate: new TextDecoder().decode(new Uint8Array([0xed, 0xa0, 0x80])),
          view: new TextDecoder().decode(new DataView(new TextEncoder().encode("xyz").buffer, 1, 1)),
          utf16: new TextDecoder("utf-16le").decode(new Uint8Array([0x68, 0, 0x3d, 0xd8, 0x00, 0xde])),
          latin1: new TextDecoder("latin1").decode(new Uint8Array([0xe9, 0x80])),
        };
        """
    )
    assert result["replaced"] == "a\ufffd\ufffd"
    assert result["fatal"] == "TypeError"
    assert result["bom"] == "h"
    assert result["keptBom"] == 2
    assert result["streamed"] == "€😀"
    assert result["overlong"] == "\ufffd\ufffd"
    assert result["surrogate"] == "\ufffd\ufffd\ufffd"
    assert result["view"] == "y"
    assert result["utf16"] == "h😀"
    assert result["latin1"] == "é€"


async def test_encode_into_stops_at_whole_characters() -> None:
    result = await run_js_async(
        r"""
        const dest = new Uint8Array(5);
        return new TextEncoder().encodeInto("ab\u{1F600}", dest);
        """
    )
    assert result == {"read": 2, "written": 2}


async def test_unknown_label_is_a_range_error() -> None:
    with pytest.raises(JsError) as caught:
        await run_js_async("new TextDecoder('klingon');")
    assert caught.value.name == "RangeError"


async def test_atob_btoa_and_invalid_character_error() -> None:
    result = await run_js_async(
        r"""
        const errors = [];
        for (const bad of ["a!", "Y", "YWJj="]) {
          try { atob(bad); } catch (e) { errors.push([e.name, e instanceof DOMException, e.code]); }
        }
        try { btoa("\u0100"); } catch (e) { errors.push([e.name, e instanceof DOMException, e.code]); }
        return {round: atob(btoa("hello\xff")), padded: atob(" YW Jj "), errors};
        """
    )
    assert result["round"] == "hello\xff"
    assert result["padded"] == "abc"
    assert result["errors"] == [["InvalidCharacterError", True, 5]] * 4


async def test_internal_base64_helpers_match_python() -> None:
    data = bytes(range(256)) * 3 + b"xy"
    encoded = base64.b64encode(data).decode()
    result = await run_js_async(
        f"""
        const bytes = __celld_web.base64ToBytes("{encoded}");
        return {{len: bytes.length, back: __celld_web.bytesToBase64(bytes),
                 url: Array.from(__celld_web.base64ToBytes("-_8"))}};
        """
    )
    assert result["len"] == len(data)
    assert result["back"] == encoded
    assert result["url"] == list(base64.urlsafe_b64decode("-_8="))
