"""Type stripping for TypeScript modules.

celld does not compile TypeScript: like Node's type stripping, it blanks out type-only
syntax with spaces (keeping every newline), so the result is JavaScript in which every
remaining token sits at the line (and, outside rewritten constructs, the column) it had in
the ``.ts`` file. Stack traces therefore point into the user's own source without a source
map.

The few TypeScript constructs with run-time meaning are rewritten in place, line by line,
into the JavaScript ``tsc`` would emit for them: ``enum`` and ``const enum`` (an object
with reverse mappings; const enums are not inlined), constructor parameter properties,
namespaces holding values, ``import x = require()`` / ``import x = A.B``, ``export =``
and ``accessor`` fields. Decorators are left in place for `celld.isolate.decorators`; what
is left is refused with file:line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

_LANGUAGE = Language(tree_sitter_typescript.language_typescript())
_TSX = Language(tree_sitter_typescript.language_tsx())

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


def _parser(tsx: bool = False) -> Parser:
    return Parser(_TSX if tsx else _LANGUAGE)


@dataclass
class _Eraser:
    """Collects byte ranges to blank, and positions where a `;` must replace a blank."""

    data: bytes
    path: Path
    ranges: list[tuple[int, int]] = field(default_factory=list)
    semicolons: set[int] = field(default_factory=set)
    moved: dict[int, str] = field(default_factory=dict)  # blanked byte -> char written there
    asi_candidates: list[tuple[int, int]] = field(default_factory=list)
    replacements: list[tuple[int, int, str]] = field(default_factory=list)

    def replace(self, start: int, end: int, text: str) -> None:
        """Write `text` over bytes start..end, keeping their line breaks (lines never move)."""
        original = self.data[start:end].decode("utf-8")
        breaks = original.count("\n") - text.count("\n")
        if breaks < 0:
            raise AssertionError("a replacement may not add lines")
        self.replacements.append((start, end, text + "\n" * breaks))

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")

    def visit_tree(self, node: Node) -> None:
        """Visit `node` and its subtree (for parts a rewriting handler keeps)."""
        stack = [node]
        while stack:
            current = stack.pop()
            if _visit(current, self):
                stack.extend(reversed(current.children))

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

    A `.tsx` file is read with the TSX grammar and keeps its JSX (`celld.isolate.jsx`
    compiles it next). Raises ModuleError (``path:line:column: ...``) for syntax errors and
    for TypeScript constructs that would need compiling rather than erasing.
    """
    from celld.isolate.jsx import parse_copy
    from celld.isolate.modules import check_syntax

    data = source.encode("utf-8")
    tsx = path.suffix.lower() == ".tsx"
    tree = _parser(tsx).parse(parse_copy(data) if tsx else data)
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
        equals = next(c for c in node.children if c.type == "=")
        er.replace(node.start_byte, equals.end_byte, "module.exports =")
        return True
    if _has_token(node, "namespace") and _has_token(node, "as"):
        er.fail(node, "TypeScript `export as namespace` is not supported")
    decl = node.child_by_field_name("declaration")
    if decl is not None and decl.type in _TYPE_STATEMENTS:
        er.erase_statement(node)
        return False
    if decl is not None and decl.type == "import_alias":
        er.fail(decl, "TypeScript `export import x = ...` is not supported; use `export const`")
    return True


def _import_statement(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "type"):
        er.erase_statement(node)
        return False
    for child in node.children:
        if child.type == "import_require_clause":
            keyword = node.children[0]  # `import x = require("y")` is `const x = require("y")`
            er.replace(keyword.start_byte, keyword.end_byte, "const ")
    return True


def _import_alias(node: Node, er: _Eraser) -> bool:
    """`import x = A.B` is `const x = A.B`."""
    keyword = node.children[0]
    er.replace(keyword.start_byte, keyword.end_byte, "const ")
    return True


def _specifier(node: Node, er: _Eraser) -> bool:
    if _has_token(node, "type"):
        er.erase_with_comma(node)
        return False
    return True


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
    keyword = next((c for c in node.children if c.type == "accessor"), None)
    name = node.child_by_field_name("name")
    if keyword is not None and name is not None:
        # `accessor x = v` is a private slot with a getter and a setter over it
        key = er.text(name)
        if name.type != "property_identifier":
            er.fail(node, "an `accessor` field with a computed name is not supported")
        slot = f"#__celld_{key}"
        er.replace(keyword.start_byte, name.end_byte, slot)
        end = node.end_byte
        following = node.next_sibling
        if following is not None and following.type == ";":
            end = following.end_byte
        er.replace(
            end,
            end,
            f"{'' if end != node.end_byte else ';'} get {key}() {{ return this.{slot}; }} "
            f"set {key}(value) {{ this.{slot} = value; }}",
        )
    return True


def _method(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type in ("readonly", "?"):
            er.erase(child)
    name = node.child_by_field_name("name")
    if name is not None and er.text(name) == "constructor":
        _parameter_properties(node, er)
    return True


_PROPERTY_MODIFIERS = ("accessibility_modifier", "readonly", "override_modifier")


def _parameter_properties(method: Node, er: _Eraser) -> None:
    """`constructor(private x: T)` assigns `this.x = x` first thing in the body (after
    `super(...)` in a derived class), as tsc emits it."""
    params = method.child_by_field_name("parameters")
    body = method.child_by_field_name("body")
    if params is None or body is None:
        return
    names = []
    for param in params.named_children:
        if not any(c.type in _PROPERTY_MODIFIERS for c in param.children):
            continue
        pattern = param.child_by_field_name("pattern")
        if pattern is None or pattern.type != "identifier":
            er.fail(param, "a parameter property must be a plain name")
            return
        names.append(er.text(pattern))
    if not names:
        return
    at = body.children[0].end_byte  # after `{`
    for statement in body.named_children:
        call = statement.named_children[0] if statement.type == "expression_statement" else None
        if call is not None and call.type == "call_expression":
            function = call.child_by_field_name("function")
            if function is not None and function.type == "super":
                at = statement.end_byte
                break
    er.replace(at, at, " " + " ".join(f"this.{n} = {n};" for n in names))


def _parameter(node: Node, er: _Eraser) -> bool:
    for child in node.children:
        if child.type in _PROPERTY_MODIFIERS:
            er.erase(child)  # the assignment is written by _parameter_properties
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
    namespace = inner is not None and inner.type in ("internal_module", "module")
    if namespace and _is_type_only_body(inner.child_by_field_name("body")):
        er.erase_statement(node)
        return False
    return True


_VALUE_DECLARATIONS = frozenset(
    {
        "lexical_declaration",
        "variable_declaration",
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "internal_module",
        "module",
        "enum_declaration",
    }
)


def _declared(node: Node, er: _Eraser) -> list[str]:
    if node.type in ("lexical_declaration", "variable_declaration"):
        names: list[str] = []
        for declarator in node.named_children:
            if declarator.type != "variable_declarator":
                continue
            stack = [declarator.child_by_field_name("name")]
            while stack:
                current = stack.pop()
                if current is None:
                    continue
                if current.type in ("identifier", "shorthand_property_identifier_pattern"):
                    names.append(er.text(current))
                elif current.type == "pair_pattern":
                    stack.append(current.child_by_field_name("value"))
                elif current.type in ("assignment_pattern", "object_assignment_pattern"):
                    stack.append(current.child_by_field_name("left"))
                elif current.type in ("object_pattern", "array_pattern", "rest_pattern"):
                    stack.extend(current.named_children)
        return names
    name = node.child_by_field_name("name")
    return [er.text(name)] if name is not None else []


def _namespace(node: Node, er: _Eraser) -> bool:
    """A namespace with values is a function filling an object, as tsc emits it:
    `var N; (function (N) { ...; N.x = x; })(N || (N = {}));`."""
    name = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    if body is None or _is_type_only_body(body):
        if node.parent is not None and node.parent.type == "export_statement":
            er.erase_statement(node.parent)
        else:
            er.erase_statement(node)
        return False
    if name is None or name.type != "identifier":
        er.fail(node, "a dotted or quoted namespace name with values is not supported")
        return False
    n = er.text(name)
    er.replace(node.start_byte, body.children[0].end_byte, f"var {n}; (function ({n}) {{")
    for statement in body.named_children:
        if statement.type != "export_statement":
            continue
        decl = statement.child_by_field_name("declaration")
        if decl is None or decl.type not in _VALUE_DECLARATIONS:
            if decl is None:
                er.fail(statement, "`export { ... }` inside a namespace is not supported")
            continue
        er.erase(statement.children[0])  # `export`
        names = _declared(decl, er)
        assigns = " ".join(f"{n}.{x} = {x};" for x in names)
        er.replace(statement.end_byte, statement.end_byte, f"; {assigns}")
    close = body.children[-1]
    er.replace(close.start_byte, close.end_byte, f"}})({n} || ({n} = {{}}));")
    return True


_RESERVED = frozenset(
    [
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "new",
        "null",
        "return",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "let",
        "static",
        "implements",
        "interface",
        "package",
        "private",
        "protected",
        "public",
        "await",
        "arguments",
        "eval",
    ]
)


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
    """`enum E { A, B = "b" }` (and `const enum`, which is not inlined) becomes tsc's object
    with reverse mappings for numeric members; members may refer to earlier ones by name."""
    name = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    if name is None or body is None:
        er.fail(node, "malformed enum")
        return False
    n = er.text(name)
    er.replace(
        node.start_byte,
        body.children[0].end_byte,
        f"var {n}; (function (__celld_t) {{ let __celld_l = -1; "
        "const __celld_m = (k, v = __celld_l + 1) => { __celld_l = v; __celld_t[k] = v; "
        'if (typeof v !== "string") __celld_t[v] = k; return v; };',
    )
    for member in body.named_children:
        if member.type == "comment":
            continue
        key_node = (
            member.child_by_field_name("name") if member.type == "enum_assignment" else member
        )
        if key_node is None:
            continue
        if key_node.type == "string":
            key = er.text(key_node)[1:-1]
        elif key_node.type == "property_identifier":
            key = er.text(key_node)
        else:
            er.fail(member, "a computed enum member name is not supported")
            return False
        local = f"const {key} = " if key.isidentifier() and key not in _RESERVED else ""
        end = member.end_byte
        following = member.next_sibling
        if following is not None and following.type == ",":
            end = following.end_byte
        quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if member.type == "enum_assignment":
            value = member.child_by_field_name("value")
            assert value is not None
            er.replace(member.start_byte, value.start_byte, f"{local}__celld_m({quoted}, ")
            er.visit_tree(value)
            er.replace(value.end_byte, end, ");")
        else:
            er.replace(member.start_byte, end, f"{local}__celld_m({quoted});")
    close = body.children[-1]
    er.replace(close.start_byte, close.end_byte, f"}})({n} || ({n} = {{}}));")
    return False


_HANDLERS = {
    "export_statement": _export_statement,
    "import_statement": _import_statement,
    "import_specifier": _specifier,
    "export_specifier": _specifier,
    "enum_declaration": _enum,
    "internal_module": _namespace,
    "module": _namespace,
    "import_alias": _import_alias,
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


def _subtract(
    ranges: list[tuple[int, int]], holes: list[tuple[int, int, str]]
) -> list[tuple[int, int]]:
    """`ranges` with the bytes that replacements cover taken out."""
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        pieces = [(start, end)]
        for h_start, h_end, _ in holes:
            next_pieces = []
            for p_start, p_end in pieces:
                if h_end <= p_start or h_start >= p_end or h_start == h_end:
                    next_pieces.append((p_start, p_end))
                    continue
                if p_start < h_start:
                    next_pieces.append((p_start, h_start))
                if h_end < p_end:
                    next_pieces.append((h_end, p_end))
            pieces = next_pieces
        out += pieces
    return out


def _apply(data: bytes, er: _Eraser) -> str:
    merged = _merge(er.ranges)
    semicolons = _tail_semicolons(er, merged)
    blanks = _subtract(merged, er.replacements) if er.replacements else merged
    marks = {p: ";" for p in semicolons} | er.moved
    # (start, end, order, replacement or None for a blank); insertions sort before a
    # replacement or blank that starts at the same byte
    ops = [(s, e, 1, None) for s, e in blanks]
    ops += [(s, e, 0 if s == e else 1, t) for s, e, t in er.replacements]
    ops.sort(key=lambda op: (op[0], op[2], op[1]))
    pieces: list[str] = []
    pos = 0
    for start, end, _, text in ops:
        if start < pos:
            from celld.isolate.modules import ModuleError

            raise ModuleError(f"{er.path}: overlapping TypeScript rewrites at byte {start}")
        pieces.append(data[pos:start].decode("utf-8"))
        if text is not None:
            pieces.append(text)
        else:
            blank = list(_blank(data[start:end].decode("utf-8")))
            for position, char in marks.items():
                if start <= position < end:
                    blank[len(data[start:position].decode("utf-8"))] = char
            pieces.append("".join(blank))
        pos = end
    pieces.append(data[pos:].decode("utf-8"))
    return "".join(pieces)
