"""Type stripping for TypeScript modules.

celld does not compile TypeScript: like Node's type stripping, it blanks out type-only
syntax with spaces (keeping every newline), so the result is JavaScript in which every
remaining token sits at exactly the line and column it had in the ``.ts`` file. Stack
traces therefore point into the user's own source without a source map. Constructs that
have runtime meaning (enums, namespaces with values, parameter properties, ...) cannot be
erased and are reported as errors instead of being compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

_LANGUAGE = Language(tree_sitter_typescript.language_typescript())

_NOT_COMPILED = "(celld strips types; it does not compile TypeScript)"

# Nodes that are pure type syntax wherever they appear outside erased statements.
_TYPE_NODES = frozenset(
    {
        "type_annotation",
        "type_parameters",
        "type_arguments",
        "implements_clause",
        "accessibility_modifier",
        "override_modifier",
        "asserts_annotation",
        "type_predicate_annotation",
        "omitting_type_annotation",
        "adding_type_annotation",
        "opting_type_annotation",
    }
)

# Statements (and class members) that declare nothing at run time.
_TYPE_STATEMENTS = frozenset(
    {
        "interface_declaration",
        "type_alias_declaration",
        "ambient_declaration",
        "function_signature",
    }
)
_TYPE_MEMBERS = frozenset({"method_signature", "abstract_method_signature", "index_signature"})

# Statements that ASI may have ended; erasing their tail could glue them to the next line.
_ASI_STATEMENTS = frozenset(
    {
        "expression_statement",
        "lexical_declaration",
        "variable_declaration",
        "return_statement",
        "throw_statement",
        "export_statement",
        "public_field_definition",
    }
)


def _parser() -> Parser:
    return Parser(_LANGUAGE)


@dataclass
class _Eraser:
    """Collects byte ranges to blank, and positions where a `;` must replace a blank."""

    data: bytes
    path: Path
    ranges: list[tuple[int, int]] = field(default_factory=list)
    semicolons: set[int] = field(default_factory=set)
    moved: dict[int, str] = field(default_factory=dict)  # blanked byte -> char written there
    asi_candidates: list[tuple[int, int]] = field(default_factory=list)

    def erase(self, node: Node) -> None:
        self.ranges.append((node.start_byte, node.end_byte))

    def erase_statement(self, node: Node) -> None:
        """Blank a whole statement but leave a `;` so the previous statement stays ended."""
        self.erase(node)
        self.semicolons.add(node.start_byte)

    def erase_with_comma(self, node: Node) -> None:
        """Blank a list item together with the comma that follows it, if any."""
        end = node.end_byte
        nxt = node.next_sibling
        if nxt is not None and nxt.type == ",":
            end = nxt.end_byte
        self.ranges.append((node.start_byte, end))

    def fail(self, node: Node, what: str) -> None:
        from celld.isolate.modules import ModuleError, format_position

        raise ModuleError(f"{format_position(self.path, self.data, node)}{what} {_NOT_COMPILED}")


def strip_types(source: str, path: Path) -> str:
    """Return `source` with TypeScript-only syntax replaced by whitespace.

    Raises ModuleError (``path:line:column: ...``) for syntax errors and for TypeScript
    constructs that would need compiling rather than erasing.
    """
    from celld.isolate.modules import ModuleError, check_syntax

    if path.suffix.lower() in (".tsx", ".cts", ".jsx"):
        raise ModuleError(
            f"{path}: {path.suffix} files are not supported (celld loads .js, .mjs, .ts and .mts)"
        )
    data = source.encode("utf-8")
    tree = _parser().parse(data)
    check_syntax(tree.root_node, data, path)
    eraser = _Eraser(data, path)
    _walk(tree.root_node, eraser)
    return _apply(data, eraser)


def _walk(root: Node, er: _Eraser) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        if _visit(node, er):
            stack.extend(reversed(node.children))


def _has_token(node: Node, token: str) -> bool:
    return any(child.type == token for child in node.children)


def _ends_with_semicolon(node: Node) -> bool:
    """True when the statement was ended by an explicit `;` rather than by ASI."""
    last = node.children[-1] if node.children else None
    if last is not None and last.type == ";":
        return True
    following = node.next_sibling
    return (
        node.type == "public_field_definition" and following is not None and following.type == ";"
    )


def _visit(node: Node, er: _Eraser) -> bool:
    """Handle one node; return True when its children still need visiting."""
    kind = node.type
    if kind in _TYPE_NODES:
        er.erase(node)
        return False
    if kind in _TYPE_STATEMENTS or kind in _TYPE_MEMBERS:
        er.erase_statement(node)
        return False
    if kind in _ASI_STATEMENTS and not _ends_with_semicolon(node):
        er.asi_candidates.append((node.start_byte, node.end_byte))
    handler = _HANDLERS.get(kind)
    if handler is not None:
        return handler(node, er)
    return True


def _export_statement(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "type"):
        er.erase_statement(node)
        return False
    if _has_token(node, "="):
        er.fail(node, "TypeScript `export =` is not supported")
    if _has_token(node, "namespace") and _has_token(node, "as"):
        er.fail(node, "TypeScript `export as namespace` is not supported")
    decl = node.child_by_field_name("declaration")
    if decl is not None and decl.type in _TYPE_STATEMENTS:
        er.erase_statement(node)
        return False
    if decl is not None and decl.type == "import_alias":
        er.fail(decl, "TypeScript `import x = ...` is not supported")
    return True


def _import_statement(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "type"):
        er.erase_statement(node)
        return False
    for child in node.children:
        if child.type == "import_require_clause":
            er.fail(node, "TypeScript `import x = require()` is not supported")
    return True


def _specifier(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "type"):
        er.erase_with_comma(node)
        return False
    return True


def _fail_with(what: str):
    def handler(node: Node, er: _Eraser) -> bool:
        er.fail(node, what)
        return False

    return handler


def _abstract_class(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type == "abstract":
            er.erase(child)
    return True


def _field(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "declare") or _has_token(node, "abstract"):
        er.erase_statement(node)
        return False
    for child in node.children:
        if child.type in ("readonly", "?", "!"):
            er.erase(child)
    return True


def _method(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type in ("readonly", "?"):
            er.erase(child)
    return True


def _parameter(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type in ("accessibility_modifier", "readonly", "override_modifier"):
            er.fail(node, "TypeScript constructor parameter property is not supported")
        if child.type == "?":
            er.erase(child)
    pattern = node.child_by_field_name("pattern")
    if pattern is not None and pattern.type == "this":
        er.erase_with_comma(node)
        return False
    return True


def _declarator(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type == "!":
            er.erase(child)
    return True


def _non_null(node: Node, er: _Eraser) -> bool:
    last = node.children[-1]
    if last.type == "!":
        er.erase(last)
    return True


def _assertion(node: Node, er: _Eraser) -> bool:
    """`x as T` / `x satisfies T`: keep the expression, blank the keyword and the type."""
    keyword = next(c for c in node.children if c.type in ("as", "satisfies"))
    er.ranges.append((keyword.start_byte, node.end_byte))
    expression = node.children[0]
    stack_visit = [expression]
    while stack_visit:
        current = stack_visit.pop()
        if _visit(current, er):
            stack_visit.extend(reversed(current.children))
    return False


def _is_type_only_body(body: Node | None) -> bool:
    if body is None:
        return True
    for statement in body.named_children:
        inner = statement
        if inner.type == "export_statement":
            decl = inner.child_by_field_name("declaration")
            if decl is None:
                return False
            inner = decl
        if inner.type == "expression_statement" and inner.named_child_count == 1:
            inner = inner.named_children[0]
        if inner.type in _TYPE_STATEMENTS or inner.type == "comment":
            continue
        if inner.type in ("internal_module", "module") and _is_type_only_body(
            inner.child_by_field_name("body")
        ):
            continue
        return False
    return True


def _expression_statement(node: Node, er: _Eraser) -> bool:
    inner = node.named_children[0] if node.named_child_count == 1 else None
    if inner is not None and inner.type in ("internal_module", "module"):
        if _is_type_only_body(inner.child_by_field_name("body")):
            er.erase_statement(node)
            return False
        er.fail(inner, "TypeScript namespace with values is not supported")
    return True


def _arrow(node: Node, er: _Eraser) -> bool:
    """An arrow's return type may span lines, but JS forbids a line break before `=>`.

    Blank the parameter list's `)` along with the type and write it again just before `=>`,
    so `)` and `=>` share a line and everything else keeps its position.
    """
    params = node.child_by_field_name("parameters")
    returns = node.child_by_field_name("return_type")
    arrow = next((c for c in node.children if c.type == "=>"), None)
    if params is None or returns is None or arrow is None:
        return True
    gap = er.data[params.end_byte : arrow.start_byte]
    if b"\n" not in gap and b"\r" not in gap:
        return True
    if er.data[params.end_byte - 1 : params.end_byte] != b")":
        return True
    er.ranges.append((params.end_byte - 1, arrow.start_byte))
    er.moved[arrow.start_byte - 1] = ")"
    return True


def _enum(node: Node, er: _Eraser) -> bool:
    what = "const enum" if _has_token(node, "const") else "enum"
    er.fail(node, f"TypeScript {what} is not supported")
    return False


_HANDLERS = {
    "export_statement": _export_statement,
    "import_statement": _import_statement,
    "import_specifier": _specifier,
    "export_specifier": _specifier,
    "enum_declaration": _enum,
    "internal_module": _fail_with("TypeScript namespace with values is not supported"),
    "module": _fail_with("TypeScript module declaration with values is not supported"),
    "import_alias": _fail_with("TypeScript `import x = ...` alias is not supported"),
    "decorator": _fail_with("decorators are not supported"),
    "abstract_class_declaration": _abstract_class,
    "public_field_definition": _field,
    "method_definition": _method,
    "required_parameter": _parameter,
    "optional_parameter": _parameter,
    "variable_declarator": _declarator,
    "non_null_expression": _non_null,
    "as_expression": _assertion,
    "satisfies_expression": _assertion,
    "expression_statement": _expression_statement,
    "arrow_function": _arrow,
}


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _blank(text: str) -> str:
    """Spaces for every character except line terminators, so positions survive."""
    return "".join(ch if ch in "\r\n\u2028\u2029" else " " for ch in text)


def _tail_semicolons(er: _Eraser, merged: list[tuple[int, int]]) -> set[int]:
    """Positions where a blanked statement tail needs a `;` to keep ASI where it was.

    When `x = y as T` ends without a semicolon, the statement was ended by ASI after `T`;
    once `as T` is blank, the next line could continue the expression (`(`, `[`, ...).
    """
    result = set(er.semicolons)
    for start, end in er.asi_candidates:
        for r_start, r_end in merged:
            if r_start < end <= r_end:
                if r_start > start and r_start not in result:
                    result.add(r_start)
                break
    return result


def _apply(data: bytes, er: _Eraser) -> str:
    merged = _merge(er.ranges)
    semicolons = _tail_semicolons(er, merged)
    pieces: list[str] = []
    pos = 0
    for start, end in merged:
        pieces.append(data[pos:start].decode("utf-8"))
        blank = list(_blank(data[start:end].decode("utf-8")))
        marks = {p: ";" for p in semicolons} | er.moved
        for position, char in marks.items():
            if start <= position < end:
                blank[len(data[start:position].decode("utf-8"))] = char
        pieces.append("".join(blank))
        pos = end
    pieces.append(data[pos:].decode("utf-8"))
    return "".join(pieces)
