"""JSX compiled to function calls, as esbuild compiles it for wrangler.

wrangler bundles with esbuild, which turns JSX in `.jsx`, `.tsx` and also `.js`/`.mjs`/`.cjs`
files (wrangler gives those the `jsx` loader) into calls: with the automatic runtime
(tsconfig `"jsx": "react-jsx"` or `"react-jsxdev"`) to `jsx`/`jsxs`/`Fragment` (or `jsxDEV`)
imported from `<jsxImportSource>/jsx-runtime` (`/jsx-dev-runtime`), falling back to
`createElement` from `<jsxImportSource>` itself for a `key` after a spread; with the classic
one (`"react"`, `"react-native"`, `"preserve"`, or no setting: esbuild never preserves JSX
for wrangler) to the factory (`jsxFactory`, default `React.createElement`) and the fragment
(`jsxFragmentFactory`, default `React.Fragment`). `@jsx`, `@jsxFrag`, `@jsxRuntime` and
`@jsxImportSource` comments in a file override the settings for that file, as in esbuild.

Like the type stripper, this keeps every line where it was: each JSX element becomes a call
expression with the same number of line breaks, the code in `{...}` sits on its own lines,
and text, attribute names and tags are written on the line they came from. Stack traces
therefore point at the user's lines without a source map. Text follows esbuild's (and
TypeScript's) rules: each line of a text run is trimmed (the first only at its end, the last
only at its start), empty lines dropped, the rest joined with one space, HTML entities
decoded; attribute strings keep their whitespace and only decode entities.
"""

from __future__ import annotations

import html.entities
import json
import re
from bisect import bisect_left
from dataclasses import dataclass, replace

from tree_sitter import Language, Node, Query, QueryCursor


@dataclass(frozen=True)
class JsxOptions:
    """The JSX settings of one file (tsconfig, wrangler config and pragmas combined)."""

    runtime: str = "classic"  # "classic" or "automatic"
    development: bool = False  # automatic only: jsxDEV from /jsx-dev-runtime
    import_source: str = "react"
    factory: str = "React.createElement"
    fragment: str = "React.Fragment"


_JSX_NODES = frozenset({"jsx_element", "jsx_self_closing_element"})
_QUERIES: dict[int, Query] = {}
_PREFIX = "__celld_jsx_"

# HTML 4 entities plus `&apos;` (the XHTML set JSX defines, as esbuild and TypeScript decode)
_ENTITIES = {**html.entities.name2codepoint, "apos": 0x27}
_ENTITY = re.compile(r"&(?:#x([0-9a-fA-F]+)|#([0-9]+)|([A-Za-z][A-Za-z0-9]*));")
# esbuild's JavaScript whitespace (what a line of JSX text is trimmed of)
_SPACE = "\t\v\f \u00a0\u1680\u202f\u205f\u3000\ufeff" + "".join(map(chr, range(0x2000, 0x200B)))
_NEWLINE = re.compile("\r\n|[\r\n\u2028\u2029]")
_PRAGMA = re.compile(r"@(jsxImportSource|jsxRuntime|jsxFrag|jsx)\s+(\S+)")


def _jsx_query(language: Language) -> Query:
    key = id(language)
    if key not in _QUERIES:
        _QUERIES[key] = Query(
            language, "(jsx_element) @jsx (jsx_self_closing_element) @jsx (comment) @comment"
        )
    return _QUERIES[key]


_LONG_REFERENCE = re.compile(rb"&#(?:[0-9]{6,}|[xX][0-9a-fA-F]{7,});")


def parse_copy(data: bytes) -> bytes:
    """`data` with the character references tree-sitter's grammars cannot read (`&#128512;`:
    they stop at five decimal digits) replaced by same-length ones they can, for parsing
    only: positions stay, and the text itself is always read from the original bytes."""
    if b"&#" not in data:
        return data
    return _LONG_REFERENCE.sub(lambda m: b"&#0;" + b" " * (len(m.group(0)) - 4), data)


def has_jsx(language: Language, root: Node) -> bool:
    """True when the tree holds any JSX element (a quick check in C before transforming)."""
    return bool(QueryCursor(_jsx_query(language)).captures(root).get("jsx"))


def decode_entities(text: str) -> str:
    """`&amp;`, `&#123;`, `&#x1F600;` and the other JSX entities decoded; unknown ones kept."""

    def one(match: re.Match[str]) -> str:
        hexa, decimal, name = match.groups()
        if name is not None:
            code = _ENTITIES.get(name)
            return chr(code) if code is not None else match.group(0)
        value = int(hexa, 16) if hexa is not None else int(decimal)
        return chr(value) if value <= 0x10FFFF else match.group(0)

    return _ENTITY.sub(one, text) if "&" in text else text


def jsx_text(raw: str) -> str:
    """The string a run of JSX text stands for (esbuild's whitespace rule, then entities)."""
    lines = _NEWLINE.split(raw)
    if len(lines) == 1:
        return decode_entities(raw)
    kept: list[str] = []
    last = len(lines) - 1
    for index, line in enumerate(lines):
        if index > 0:
            line = line.lstrip(_SPACE)
        if index < last:
            line = line.rstrip(_SPACE)
        if line:
            kept.append(line)
    return decode_entities(" ".join(kept))


def js_string(value: str) -> str:
    """A double-quoted JavaScript string literal on one line."""
    return (
        json.dumps(value, ensure_ascii=False)
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def pragmas(language: Language, root: Node, options: JsxOptions) -> JsxOptions:
    """`options` with the file's `@jsx...` comments applied."""
    comments = QueryCursor(_jsx_query(language)).captures(root).get("comment", [])
    for comment in comments:
        text = comment.text.decode("utf-8", "replace") if comment.text else ""
        if "@jsx" not in text:
            continue
        for name, value in _PRAGMA.findall(text):
            if name == "jsx":
                options = replace(options, factory=value)
            elif name == "jsxFrag":
                options = replace(options, fragment=value)
            elif name == "jsxImportSource":
                options = replace(options, import_source=value)
            elif name == "jsxRuntime" and value in ("classic", "automatic"):
                options = replace(options, runtime=value)
    return options


class JsxError(Exception):
    """JSX that cannot be compiled; the message starts with `path:line:column: `."""


@dataclass
class _Piece:
    text: str
    line: int | None  # 0-based source line it belongs on; None: wherever the output is


class _Compiler:
    """Compiles every JSX element of one parsed file, keeping its line breaks."""

    def __init__(
        self,
        data: bytes,
        root: Node,
        language: Language,
        display: str,
        options: JsxOptions,
        commonjs: bool,
    ) -> None:
        self.data = data
        self.root = root
        self.display = display
        self.options = options
        self.commonjs = commonjs
        found = QueryCursor(_jsx_query(language)).captures(root).get("jsx", [])
        self.starts = sorted(n.start_byte for n in found)
        self.used: set[str] = set()  # runtime names: jsx, jsxs, jsxDEV, Fragment, createElement

    # ---- helpers

    def where(self, node: Node) -> str:
        from celld.isolate.modules import format_position

        return format_position(self.display, self.data, node)

    def raw(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8")

    def contains_jsx(self, start: int, end: int) -> bool:
        at = bisect_left(self.starts, start)
        return at < len(self.starts) and self.starts[at] < end

    def source(self, node: Node) -> str:
        return self.range(node.start_byte, node.end_byte, [node])

    def range(self, start: int, end: int, nodes: list[Node]) -> str:
        """The code from `start` to `end` (spanning `nodes`) with its JSX compiled."""
        if not self.contains_jsx(start, end):
            return self.raw(start, end)
        out: list[str] = []
        pos = start
        for node in nodes:
            if node.end_byte <= start or node.start_byte >= end:
                continue
            lo, hi = max(start, node.start_byte), min(end, node.end_byte)
            out.append(self.raw(pos, lo))
            if node.type in _JSX_NODES and (lo, hi) == (node.start_byte, node.end_byte):
                out.append(self.element(node))
            else:
                out.append(self.range(lo, hi, node.children))
            pos = hi
        out.append(self.raw(pos, end))
        return "".join(out)

    def runtime(self, name: str) -> str:
        """How the compiled code refers to an automatic-runtime export."""
        self.used.add(name)
        if self.commonjs:
            module = "src" if name == "createElement" else "rt"
            return (
                f"(0, {_PREFIX}{module}().{name})"
                if name != "Fragment"
                else (f"{_PREFIX}{module}().Fragment")
            )
        return _PREFIX + name

    # ---- the file

    def compile(self) -> str:
        text = self.range(0, len(self.data), self.root.children)
        return text + self.imports()

    def imports(self) -> str:
        if not self.used:
            return ""
        source = self.options.import_source
        runtime = source + ("/jsx-dev-runtime" if self.options.development else "/jsx-runtime")
        from_runtime = sorted(self.used - {"createElement"})
        if self.commonjs:
            out = ""
            if from_runtime:
                out += f"\nfunction {_PREFIX}rt() {{ return require({js_string(runtime)}); }}"
            if "createElement" in self.used:
                out += f"\nfunction {_PREFIX}src() {{ return require({js_string(source)}); }}"
            return out
        out = ""
        if from_runtime:
            names = ", ".join(f"{n} as {_PREFIX}{n}" for n in from_runtime)
            out += f"\nimport {{ {names} }} from {js_string(runtime)};"
        if "createElement" in self.used:
            out += (
                f"\nimport {{ createElement as {_PREFIX}createElement }} from {js_string(source)};"
            )
        return out

    # ---- one element

    def element(self, node: Node) -> str:
        opening = (
            node
            if node.type == "jsx_self_closing_element"
            else node.child_by_field_name("open_tag")
        )
        assert opening is not None
        name = opening.child_by_field_name("name")
        attributes = [
            c for c in opening.named_children if c.type in ("jsx_attribute", "jsx_expression")
        ]
        attributes = [c for c in attributes if c != name]
        children = self.children(node) if node.type == "jsx_element" else []
        first_line = node.start_point[0]
        tag = self.tag(name, node)
        if self.options.runtime == "automatic":
            pieces = self.automatic(node, tag, attributes, children)
        else:
            pieces = self.classic(tag, attributes, children, self.options.factory)
        return self.layout(pieces, first_line, node)

    def tag(self, name: Node | None, node: Node) -> _Piece:
        if name is None:  # a fragment <>...</>
            if self.options.runtime == "automatic":
                return _Piece(self.runtime("Fragment"), node.start_point[0])
            return _Piece(self.options.fragment, node.start_point[0])
        text = self.raw(name.start_byte, name.end_byte)
        line = name.start_point[0]
        if name.type == "jsx_namespace_name":
            return _Piece(js_string(re.sub(r"\s+", "", text)), line)
        if name.type in ("identifier", "this") and ("-" in text or "a" <= text[0] <= "z"):
            return _Piece(js_string(text), line)
        return _Piece(self.source(name), line)

    def children(self, node: Node) -> list[list[_Piece]]:
        """Each child as pieces: text runs, `{expression}`s and elements, empty ones dropped."""
        opening = node.child_by_field_name("open_tag")
        closing = node.child_by_field_name("close_tag")
        assert opening is not None and closing is not None
        out: list[list[_Piece]] = []
        pos = opening.end_byte
        between = [
            c for c in node.children if opening.end_byte <= c.start_byte < closing.start_byte
        ]
        for child in [*between, closing]:
            if child is not closing and child.type not in ("jsx_expression", *_JSX_NODES):
                continue  # text (and what tree-sitter made of it) is read from the bytes
            if child.start_byte > pos:
                raw = self.raw(pos, child.start_byte)
                text = jsx_text(raw)
                if text:
                    offset = len(raw) - len(raw.lstrip(" \t\r\n\u2028\u2029"))
                    line = self.line_at(pos + len(raw[:offset].encode("utf-8")))
                    out.append([_Piece(js_string(text), line)])
            pos = child.end_byte
            if child is closing:
                break
            if child.type in _JSX_NODES:
                out.append([_Piece(self.element(child), child.start_point[0])])
                continue
            inner = [c for c in child.named_children if c.type != "comment"]
            if not inner:
                continue  # {} and {/* comment */}
            if inner[0].type == "spread_element":
                argument = inner[0].named_children[0]
                out.append(
                    [_Piece("..." + self.expression(child, argument), argument.start_point[0])]
                )
                continue
            out.append([_Piece(self.expression(child, inner[0]), inner[0].start_point[0])])
        return out

    def line_at(self, byte: int) -> int:
        return self.data.count(b"\n", 0, byte)

    def expression(self, container: Node, inner: Node) -> str:
        """The code inside `{...}` (with any comments beside it), JSX compiled."""
        start = container.children[0].end_byte
        end = container.children[-1].start_byte
        if inner.type == "spread_element":
            start = inner.named_children[0].start_byte
        return self.range(start, end, container.children)

    def attribute_value(self, attribute: Node) -> _Piece:
        """The value of `name`, `name="text"`, `name={code}` or `name=<element/>`."""
        value = attribute.named_children[1] if attribute.named_child_count > 1 else None
        if value is None:
            return _Piece("true", attribute.start_point[0])
        line = value.start_point[0]
        if value.type == "string":
            return _Piece(
                js_string(decode_entities(self.raw(value.start_byte + 1, value.end_byte - 1))), line
            )
        if value.type in _JSX_NODES:
            return _Piece(self.element(value), line)
        inner = [c for c in value.named_children if c.type != "comment"]
        if not inner:
            raise JsxError(
                f"{self.where(value)}JSX attributes must only be assigned a non-empty expression"
            )
        return _Piece(self.expression(value, inner[0]), inner[0].start_point[0])

    def attribute_name(self, attribute: Node) -> tuple[str, str]:
        name = attribute.named_children[0]
        text = re.sub(r"\s+", "", self.raw(name.start_byte, name.end_byte))
        key = text if re.fullmatch(r"[A-Za-z_$][\w$]*", text) else js_string(text)
        return text, key

    def props(self, attributes: list[Node], skip: Node | None) -> list[_Piece]:
        """`{ a: 1, ...b }` pieces for the attributes (without the braces)."""
        pieces: list[_Piece] = []
        for attribute in attributes:
            if attribute is skip:
                continue
            if pieces:
                pieces.append(_Piece(", ", None))
            if attribute.type == "jsx_expression":
                spread = next(c for c in attribute.named_children if c.type == "spread_element")
                argument = spread.named_children[0]
                pieces.append(
                    _Piece("..." + self.expression(attribute, spread), argument.start_point[0])
                )
                continue
            _, key = self.attribute_name(attribute)
            pieces.append(_Piece(key + ": ", attribute.start_point[0]))
            pieces.append(self.attribute_value(attribute))
        return pieces

    def classic(
        self, tag: _Piece, attributes: list[Node], children: list[list[_Piece]], factory: str
    ) -> list[_Piece]:
        pieces = [_Piece(factory + "(", tag.line), tag, _Piece(", ", None)]
        if attributes:
            pieces.append(_Piece("{ ", None))
            pieces += self.props(attributes, None)
            pieces.append(_Piece(" }", None))
        else:
            pieces.append(_Piece("null", None))
        for child in children:
            pieces.append(_Piece(", ", None))
            pieces += child
        pieces.append(_Piece(")", None))
        return pieces

    def automatic(
        self, node: Node, tag: _Piece, attributes: list[Node], children: list[list[_Piece]]
    ) -> list[_Piece]:
        key: Node | None = None
        spread_seen = False
        for attribute in attributes:
            if attribute.type == "jsx_expression":
                spread_seen = True
            elif self.attribute_name(attribute)[0] == "key":
                if attribute.named_child_count < 2:
                    raise JsxError(
                        f'{self.where(attribute)}Please provide an explicit value for "key"'
                    )
                if spread_seen:
                    # esbuild (and React) fall back to createElement for a key after a spread
                    return self.classic(tag, attributes, children, self.runtime("createElement"))
                if key is None:
                    key = attribute
        spread_child = any(p.text.startswith("...") for c in children for p in c[:1])
        static = len(children) > 1 or spread_child
        if self.options.development:
            function = self.runtime("jsxDEV")
        else:
            function = self.runtime("jsxs" if static else "jsx")
        pieces = [_Piece(function + "(", tag.line), tag, _Piece(", { ", None)]
        pieces += self.props(attributes, key)
        if children:
            if len(pieces) > 3:
                pieces.append(_Piece(", ", None))
            pieces.append(_Piece("children: ", None))
            if static:
                pieces.append(_Piece("[", None))
                for index, child in enumerate(children):
                    if index:
                        pieces.append(_Piece(", ", None))
                    pieces += child
                pieces.append(_Piece("]", None))
            else:
                pieces += children[0]
        pieces.append(_Piece(" }", None))
        if key is not None:
            value = self.attribute_value(key)
            if "\n" in value.text:
                raise JsxError(
                    f"{self.where(key)}celld keeps every line of a module in place and cannot "
                    "move a `key` expression that spans lines after the children; write it on "
                    "one line"
                )
            pieces += [_Piece(", ", None), _Piece(value.text, None)]
        elif self.options.development:
            pieces.append(_Piece(", void 0", None))
        if self.options.development:
            line, column = node.start_point[0] + 1, self.column(node)
            pieces.append(
                _Piece(
                    f", {'true' if static else 'false'}, {{ fileName: {js_string(self.display)}, "
                    f"lineNumber: {line}, columnNumber: {column} }}",
                    None,
                )
            )
        pieces.append(_Piece(")", None))
        return pieces

    def column(self, node: Node) -> int:
        row_start = node.start_byte - node.start_point[1]
        return len(self.data[row_start : node.start_byte].decode("utf-8", "replace")) + 1

    def layout(self, pieces: list[_Piece], first_line: int, node: Node) -> str:
        """Join `pieces`, breaking lines so each sits on its source line; the result has the
        element's own number of line breaks."""
        out: list[str] = []
        line = first_line
        for piece in pieces:
            if piece.line is not None and piece.line > line and out:
                out.append("\n" * (piece.line - line))
                line = piece.line
            out.append(piece.text)
            line += piece.text.count("\n")
        last = node.end_point[0]
        if line > last:
            raise JsxError(f"{self.where(node)}celld cannot compile this JSX element in place")
        out.append("\n" * (last - line))
        return "".join(out)


def compile_jsx(
    data: bytes,
    root: Node,
    language: Language,
    display: str,
    options: JsxOptions,
    *,
    commonjs: bool = False,
) -> str:
    """The source of the parsed file `data` with every JSX element compiled to calls.

    `commonjs` (a CommonJS module) makes the automatic runtime a hoisted `require`, since an
    `import` statement would turn the file into an ES module. Raises JsxError.
    """
    options = pragmas(language, root, options)
    return _Compiler(data, root, language, display, options, commonjs).compile()
