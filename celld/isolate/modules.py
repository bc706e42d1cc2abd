"""Bundling a Worker's ES modules into one classic script.

The QuickJS binding celld uses can only evaluate classic scripts, so a Worker's module
graph is rewritten, with tree-sitter's syntax tree (never with text patterns), into a single
script that reproduces ES module semantics closely enough for real Worker projects:

* each module body becomes a strict function whose lines sit unchanged in the bundle
  (import/export syntax is spliced in place), so `Bundle.locate` can map QuickJS stack
  positions back to the user's files;
* exports are getters over the module's own bindings, and every use of an imported name is
  rewritten into a property read on the exporter's namespace, so bindings stay live and
  import cycles behave as in ESM;
* modules are evaluated once each, dependencies first (depth-first post-order).

TypeScript files are type-stripped first (see `celld.isolate.typescript`); stripping keeps
every position, so one mapping serves both languages.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter_javascript
from tree_sitter import Language, Node, Parser, Query, QueryCursor

BUILTIN_MODULES: frozenset[str] = frozenset({"cloudflare:workers", "cloudflare:workflows"})

_JS = Language(tree_sitter_javascript.language())

_SCRIPT_SUFFIXES = (".js", ".mjs", ".ts", ".mts")
_TS_SUFFIXES = (".ts", ".mts")
_TEXT_SUFFIXES = (".txt", ".html", ".sql")
_DATA_SUFFIXES = (".bin",)

_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "function",
        "generator_function",
        "arrow_function",
        "method_definition",
        "class_static_block",
    }
)
_BLOCKS = frozenset(
    {"statement_block", "for_statement", "for_in_statement", "switch_body", "catch_clause"}
)

_MISC_QUERY = Query(
    _JS,
    """
    (await_expression) @await
    (for_in_statement "await") @for_await
    (return_statement) @return
    (meta_property) @meta
    (call_expression function: (import)) @dynamic
    (decorator) @decorator
    """,
)
_PROBLEMS = {
    "top-level await": "top-level await is not supported (celld runs modules as scripts); "
    "move it into a function",
    "return": "return outside of a function",
    "decorator": "decorators are not supported",
}


class ModuleError(Exception):
    """Raised for anything that stops a project from loading.

    str(e) starts with 'path:line:column: ' (1-based) where a position is known.
    """


# --------------------------------------------------------------------------- positions


def _column(data: bytes, node: Node) -> int:
    """1-based character column; tree-sitter counts bytes, people and QuickJS count chars."""
    row_start = node.start_byte - node.start_point[1]
    return len(data[row_start : node.start_byte].decode("utf-8", "replace")) + 1


def format_position(path: Path | str, data: bytes, node: Node) -> str:
    """The 'path:line:column: ' prefix every positioned ModuleError starts with."""
    return f"{path}:{node.start_point[0] + 1}:{_column(data, node)}: "


def _first_error(root: Node) -> Node | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing or node.is_error:
            return node
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return None


def check_syntax(root: Node, data: bytes, path: Path | str) -> None:
    """Raise ModuleError at the first ERROR or MISSING node of a parse."""
    if not root.has_error:
        return
    node = _first_error(root)
    if node is None:
        raise ModuleError(f"{path}: syntax error")
    if node.is_missing:
        detail = f"missing {node.type!r}"
    else:
        text = data[node.start_byte : node.end_byte].decode("utf-8", "replace").strip()
        token = text.split()[0] if text.split() else text
        detail = f"unexpected {token[:40]!r}"
    raise ModuleError(f"{format_position(path, data, node)}syntax error: {detail}")


# --------------------------------------------------------------------------- bundle


@dataclass(frozen=True)
class _Span:
    """Where one module's lines landed in the bundle, plus column shifts from splices."""

    display: str
    first_line: int  # 1-based bundle line holding the module's line 1
    line_count: int
    anchors: dict[int, tuple[tuple[int, int, bool], ...]]  # module line -> (out, orig, frozen)


@dataclass(frozen=True)
class Bundle:
    """One classic script holding a Worker's whole module graph."""

    source: str
    files: tuple[Path, ...]
    spans: tuple[_Span, ...] = field(default=(), repr=False, compare=False)

    def locate(self, line: int, column: int) -> tuple[str, int, int] | None:
        """Map a 1-based (line, column) in `source` back to (file path, line, column) in the
        original module, or None (runtime glue)."""
        for span in self.spans:
            if span.first_line <= line < span.first_line + span.line_count:
                module_line = line - span.first_line + 1
                return span.display, module_line, _map_column(span, module_line, column)
        return None


def _map_column(span: _Span, line: int, column: int) -> int:
    col0 = column - 1
    mapped = col0
    for out_col, orig_col, frozen in span.anchors.get(line, ()):
        if out_col > col0:
            break
        mapped = orig_col if frozen else orig_col + (col0 - out_col)
    return mapped + 1


# --------------------------------------------------------------------------- module records


@dataclass
class _Request:
    """One static `import ... from` / `export ... from` / `import "x"` in source order."""

    specifier: str
    where: str  # 'path:line:col: ' of the specifier
    target: int | str = -1  # module index, or builtin specifier


@dataclass
class _Import:
    local: str
    request: int
    name: str  # export name, or "*" for a namespace import
    where: str
    used: bool = False


@dataclass
class _Module:
    path: Path
    display: str
    kind: str  # "script", "json", "text", "data"
    typescript: bool = False
    data: bytes = b""
    value: str = ""  # JS expression of the default export for non-script modules
    requests: list[_Request] = field(default_factory=list)
    imports: dict[str, _Import] = field(default_factory=dict)
    local_exports: dict[str, str] = field(default_factory=dict)  # export name -> local
    indirect_exports: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    star_exports: list[int] = field(default_factory=list)
    dynamic: list[_Request] = field(default_factory=list)
    splices: list[tuple[int, int, str]] = field(default_factory=list)
    prologue_fixups: list[str] = field(default_factory=list)
    uses_meta: bool = False


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8")


def _string_value(data: bytes, node: Node) -> str:
    """Value of a string literal node (specifiers are plain; escapes are decoded via JSON)."""
    raw = _text(data, node)
    body = raw[1:-1]
    if "\\" not in body:
        return body
    try:
        return json.loads('"' + body.replace('"', '\\"').replace("\\'", "'") + '"')
    except ValueError:
        return body


def _blank(text: str) -> str:
    return "".join(ch if ch in "\r\n\u2028\u2029" else " " for ch in text)


def _is_identifier(name: str) -> bool:
    return name.replace("$", "_").isidentifier()


# --------------------------------------------------------------------------- analysis


class _Analyzer:
    """Reads one script module's syntax tree: its requests, bindings and the splices that
    turn it into a function body."""

    def __init__(self, module: _Module, data: bytes) -> None:
        self.m = module
        self.data = data
        self.root = Parser(_JS).parse(data).root_node

    def where(self, node: Node) -> str:
        return format_position(self.m.display, self.data, node)

    def splice(self, node_or_start: Node | int, end: int | None, text: str) -> None:
        if isinstance(node_or_start, Node):
            start, end = node_or_start.start_byte, node_or_start.end_byte
        else:
            start = node_or_start
        assert end is not None
        self.m.splices.append((start, end, text))

    def blank(self, node: Node) -> None:
        self.splice(node, None, _blank(_text(self.data, node)))

    def run(self) -> None:
        check_syntax(self.root, self.data, self.m.display)
        statements = self.root.named_children
        self.top_level = _top_level_names(statements, self.data)
        for node in statements:
            if node.type == "import_statement":
                self.import_statement(node)
            elif node.type == "hash_bang_line":
                self.blank(node)
        for node in statements:
            if node.type == "export_statement":
                self.export_statement(node)
        self.walk()

    # ---- requests

    def request(self, source: Node) -> int:
        spec = _string_value(self.data, source)
        self.m.requests.append(_Request(spec, self.where(source)))
        return len(self.m.requests) - 1

    # ---- imports

    def import_statement(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        if source is None:
            raise ModuleError(f"{self.where(node)}unsupported import statement")
        index = self.request(source)
        for clause in node.named_children:
            if clause.type == "import_clause":
                self.import_clause(clause, index)
        self.blank(node)

    def bind(self, local: Node, index: int, name: str) -> None:
        self.m.imports[_text(self.data, local)] = _Import(
            _text(self.data, local), index, name, self.where(local)
        )

    def import_clause(self, clause: Node, index: int) -> None:
        for part in clause.named_children:
            if part.type == "identifier":
                self.bind(part, index, "default")
            elif part.type == "namespace_import":
                self.bind(part.named_children[-1], index, "*")
            elif part.type == "named_imports":
                for spec in part.named_children:
                    if spec.type != "import_specifier":
                        continue
                    name = spec.child_by_field_name("name")
                    alias = spec.child_by_field_name("alias") or name
                    assert name is not None and alias is not None
                    if name.type == "string":
                        raise ModuleError(
                            f"{self.where(name)}string import names are not supported"
                        )
                    self.bind(alias, index, _text(self.data, name))

    # ---- exports

    def export_name(self, node: Node) -> str:
        if node.type == "string":
            raise ModuleError(f"{self.where(node)}string export names are not supported")
        return _text(self.data, node)

    def add_export(self, name: str, local: str, node: Node) -> None:
        if name in self.m.local_exports or name in self.m.indirect_exports:
            raise ModuleError(f"{self.where(node)}duplicate export {name!r}")
        self.m.local_exports[name] = local

    def export_statement(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        declaration = node.child_by_field_name("declaration")
        value = node.child_by_field_name("value")
        is_default = any(c.type == "default" for c in node.children)
        if source is not None:
            self.export_from(node, source)
        elif is_default:
            self.export_default(node, declaration or value)
        elif declaration is not None:
            for name_node in _declared_names(declaration):
                name = _text(self.data, name_node)
                self.add_export(name, name, name_node)
            self.blank(node.children[0])  # the `export` keyword
        else:
            clause = next(c for c in node.named_children if c.type == "export_clause")
            for spec in clause.named_children:
                if spec.type != "export_specifier":
                    continue
                name = spec.child_by_field_name("name")
                alias = spec.child_by_field_name("alias") or name
                assert name is not None and alias is not None
                local = self.export_name(name)
                exported = self.export_name(alias)
                binding = self.m.imports.get(local)
                if binding is not None and binding.name != "*":
                    binding.used = True
                    self.m.indirect_exports[exported] = (
                        binding.request,
                        binding.name,
                        self.where(spec),
                    )
                elif local in self.top_level or binding is not None:
                    self.add_export(exported, local, spec)
                elif not self.m.typescript:  # in TypeScript, a type exported without `type`
                    raise ModuleError(f"{self.where(name)}export {local!r} is not defined")
            self.blank(node)

    def export_from(self, node: Node, source: Node) -> None:
        index = self.request(source)
        clause = next((c for c in node.named_children if c.type == "export_clause"), None)
        namespace = next((c for c in node.named_children if c.type == "namespace_export"), None)
        if clause is not None:
            for spec in clause.named_children:
                if spec.type != "export_specifier":
                    continue
                name = spec.child_by_field_name("name")
                alias = spec.child_by_field_name("alias") or name
                assert name is not None and alias is not None
                exported = self.export_name(alias)
                self.m.indirect_exports[exported] = (
                    index,
                    self.export_name(name),
                    self.where(spec),
                )
        elif namespace is not None:
            exported = self.export_name(namespace.named_children[-1])
            self.m.indirect_exports[exported] = (index, "*", self.where(namespace))
        else:
            self.m.star_exports.append(index)
        self.blank(node)

    def export_default(self, node: Node, target: Node | None) -> None:
        if target is None:
            raise ModuleError(f"{self.where(node)}unsupported export default")
        keywords = [c for c in node.children if c.type in ("export", "default")]
        name = target.child_by_field_name("name")
        hoistable = target.type in (
            "function_declaration",
            "generator_function_declaration",
            "function_expression",
            "function",
            "generator_function",
            "class_declaration",
            "class",
        )
        if hoistable and (name is not None or target.type not in ("class", "class_declaration")):
            for keyword in keywords:
                self.blank(keyword)
        if hoistable and name is not None:
            self.add_export("default", _text(self.data, name), node)
            return
        if hoistable and target.type not in ("class", "class_declaration"):
            params = target.child_by_field_name("parameters")
            assert params is not None
            self.splice(params.start_byte, params.start_byte, " __celld_default")
            self.m.prologue_fixups.append(
                'Object.defineProperty(__celld_default, "name", { value: "default" });'
            )
            self.add_export("default", "__celld_default", node)
            return
        # An expression (or anonymous class): `{ default: X }.default` gives anonymous
        # functions and classes the name "default", as `export default` does.
        gap = self.data[keywords[0].start_byte : target.start_byte].decode("utf-8")
        self.splice(
            keywords[0].start_byte,
            target.start_byte,
            "const __celld_default = { default: " + "\n" * gap.count("\n"),
        )
        self.splice(target.end_byte, target.end_byte, " }.default;")
        self.add_export("default", "__celld_default", node)

    # ---- whole-tree walk: references, dynamic import, import.meta, top-level checks

    def walk(self) -> None:
        """Rewrite what can appear anywhere in a module, found with tree-sitter queries.

        Queries run in C and return only the few nodes of interest, which keeps large
        (pre-bundled) Workers fast to load.
        """
        captures = QueryCursor(_MISC_QUERY).captures(self.root)
        problems = [(n, "top-level await") for n in captures.get("await", [])]
        problems += [(n, "top-level await") for n in captures.get("for_await", [])]
        problems += [(n, "return") for n in captures.get("return", [])]
        problems = [(n, what) for n, what in problems if _enclosing(n, _FUNCTIONS) is None]
        problems += [(n, "decorator") for n in captures.get("decorator", [])]
        if problems:
            node, what = min(problems, key=lambda item: item[0].start_byte)
            raise ModuleError(self.where(node) + _PROBLEMS[what])
        for node in captures.get("meta", []):
            if _text(self.data, node).startswith("import"):
                self.m.uses_meta = True
                self.splice(node, None, "__celld_meta")
        replaced: list[tuple[int, int]] = [
            (n.start_byte, n.end_byte)
            for n in self.root.named_children
            if n.type == "import_statement"
            or (
                n.type == "export_statement"
                and any(c.type in ("export_clause", "namespace_export", "*") for c in n.children)
            )
        ]
        for node in captures.get("dynamic", []):
            function = node.child_by_field_name("function")
            if function is not None and self.dynamic_import(node, function):
                replaced.append((node.start_byte, node.end_byte))
        self.rewrite_references(sorted(replaced))

    def rewrite_references(self, replaced: list[tuple[int, int]]) -> None:
        """Turn every use of an imported name into a read of the exporter's namespace."""
        imported = {k: v for k, v in self.m.imports.items() if v.name != "*"}
        if not imported:
            return
        names = " ".join(json.dumps(name) for name in imported)
        query = Query(
            _JS,
            f"((identifier) @id (#any-of? @id {names}))\n"
            f"((shorthand_property_identifier) @id (#any-of? @id {names}))\n"
            f"((shorthand_property_identifier_pattern) @id (#any-of? @id {names}))",
        )
        starts = [start for start, _ in replaced]
        occurrences = []
        declared: dict[int, set[str]] = {}
        for node in QueryCursor(query).captures(self.root).get("id", []):
            at = bisect_right(starts, node.start_byte) - 1
            if at >= 0 and node.start_byte < replaced[at][1]:
                continue
            scope = _declaration_scope(node)
            if scope is not None:
                if scope.type != "program":
                    declared.setdefault(scope.id, set()).add(_text(self.data, node))
            elif node.type != "shorthand_property_identifier_pattern":
                occurrences.append(node)
        for node in occurrences:
            self.reference(node, declared)

    def reference(self, node: Node, declared: dict[int, set[str]]) -> None:
        name = _text(self.data, node)
        scope = node.parent if declared else None
        while scope is not None and scope.type != "program":
            if name in declared.get(scope.id, ()):
                return  # a local declaration shadows the import here
            scope = scope.parent
        binding = self.m.imports[name]
        binding.used = True
        prop = binding.name
        access = f"__celld_i{binding.request}" + (
            f".{prop}" if _is_identifier(prop) else f"[{json.dumps(prop)}]"
        )
        parent = node.parent
        if node.type == "shorthand_property_identifier":
            access = f"{name}: {access}"
        elif (
            parent is not None
            and parent.type == "call_expression"
            and (parent.child_by_field_name("function") == node)
        ):
            access = f"(0, {access})"
        self.splice(node, None, access)

    def dynamic_import(self, call: Node, keyword: Node) -> bool:
        """Rewrite `import(...)`; True when the whole call was replaced."""
        arguments = call.child_by_field_name("arguments")
        args = arguments.named_children if arguments is not None else []
        first = args[0] if args else None
        literal = first is not None and (
            first.type == "string"
            or (
                first.type == "template_string"
                and not any(c.type == "template_substitution" for c in first.children)
            )
        )
        if literal and first is not None:
            spec = (
                _string_value(self.data, first)
                if first.type == "string"
                else _text(self.data, first)[1:-1]
            )
            self.m.dynamic.append(_Request(spec, self.where(first)))
            index = len(self.m.dynamic) - 1
            text = f"__celld_dynamic[{index}]()"
            original = _text(self.data, call)
            newlines = original.count("\n")
            self.splice(call, None, text + "\n" * newlines)
            return True
        self.splice(keyword, None, "__celld_nodyn")
        assert arguments is not None
        self.splice(
            arguments.start_byte + 1,
            arguments.start_byte + 1,
            json.dumps(self.where(call).rstrip(": ")) + ", ",
        )
        return False


def _top_level_names(statements: list[Node], data: bytes) -> set[str]:
    """Names declared at module level (what `export { x }` may refer to)."""
    names: set[str] = set()
    for node in statements:
        if node.type == "export_statement":
            inner = node.child_by_field_name("declaration")
            if inner is None:
                continue
            node = inner
        if node.type in (
            "lexical_declaration",
            "variable_declaration",
            "function_declaration",
            "generator_function_declaration",
            "class_declaration",
        ):
            names.update(_text(data, n) for n in _declared_names(node))
    return names


def _enclosing(node: Node, kinds: frozenset[str]) -> Node | None:
    parent = node.parent
    while parent is not None:
        if parent.type in kinds:
            return parent
        parent = parent.parent
    return None


def _pattern_names(node: Node | None) -> list[Node]:
    """Identifiers a binding pattern declares."""
    out: list[Node] = []
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        kind = current.type
        if kind in ("identifier", "shorthand_property_identifier_pattern"):
            out.append(current)
        elif kind == "pair_pattern":
            stack.append(current.child_by_field_name("value"))
        elif kind in ("assignment_pattern", "object_assignment_pattern"):
            stack.append(current.child_by_field_name("left"))
        elif kind in ("object_pattern", "array_pattern", "rest_pattern"):
            stack.extend(current.named_children)
    return [n for n in out if n is not None]


def _declared_names(declaration: Node) -> list[Node]:
    """Names an exported declaration introduces."""
    if declaration.type in ("lexical_declaration", "variable_declaration"):
        names: list[Node] = []
        for declarator in declaration.named_children:
            if declarator.type == "variable_declarator":
                names.extend(_pattern_names(declarator.child_by_field_name("name")))
        return names
    name = declaration.child_by_field_name("name")
    return [name] if name is not None else []


_PATTERNS = frozenset(
    {
        "object_pattern",
        "array_pattern",
        "pair_pattern",
        "assignment_pattern",
        "object_assignment_pattern",
        "rest_pattern",
    }
)


def _declaration_scope(ident: Node) -> Node | None:
    """The scope an identifier declares a binding in, or None when it is not a declaration.

    Only occurrences of imported names are asked about, so this climbs from the name
    instead of tracking every scope in the module.
    """
    node = ident
    parent = node.parent
    while parent is not None and parent.type in _PATTERNS:
        if parent.type == "pair_pattern" and parent.child_by_field_name("value") != node:
            return None
        if parent.type in ("assignment_pattern", "object_assignment_pattern") and (
            parent.child_by_field_name("left") != node
        ):
            return None  # part of a default value: a use, not a declaration
        node, parent = parent, parent.parent
    if parent is None:
        return None
    kind = parent.type
    if kind == "variable_declarator" and parent.child_by_field_name("name") == node:
        declaration = parent.parent
        if declaration is not None and declaration.type == "variable_declaration":
            return _enclosing(parent, _FUNCTIONS | {"program"})
        return _enclosing(parent, _BLOCKS | _FUNCTIONS | {"program"})
    if kind == "formal_parameters":
        return parent.parent
    if kind in ("arrow_function", "catch_clause") and (
        parent.child_by_field_name("parameter") == node
    ):
        return parent
    if kind == "for_in_statement" and parent.child_by_field_name("left") == node:
        declares = parent.child_by_field_name("kind")
        if declares is None:
            return None
        if declares.type == "var":
            return _enclosing(parent, _FUNCTIONS | {"program"})
        return parent
    if parent.child_by_field_name("name") != node:
        return None
    if kind in ("function_declaration", "generator_function_declaration", "class_declaration"):
        return _enclosing(parent, _BLOCKS | _FUNCTIONS | {"program"})
    if kind in ("function_expression", "function", "generator_function", "class"):
        return parent
    return None


# --------------------------------------------------------------------------- loading


def _display(path: Path, root: Path | None) -> str:
    for base in (root, Path.cwd()):
        if base is None:
            continue
        try:
            return str(path.relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def _resolve_file(base: Path) -> Path | None:
    """Find the file a relative specifier names, the way TypeScript-era bundlers do."""
    candidates = [base]
    if base.suffix == ".js":
        candidates.append(base.with_suffix(".ts"))
    elif base.suffix == ".mjs":
        candidates.append(base.with_suffix(".mts"))
    candidates += [base.with_name(base.name + ext) for ext in _SCRIPT_SUFFIXES]
    candidates += [base / f"index{ext}" for ext in _SCRIPT_SUFFIXES]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return None


class _Linker:
    """Loads the module graph from the entry, assigning indexes in discovery order."""

    def __init__(self, builtins: Iterable[str], root: Path | None) -> None:
        self.builtins = frozenset(builtins)
        self.root = root
        self.modules: list[_Module] = []
        self.index: dict[Path, int] = {}

    def resolve(self, request: _Request, importer: _Module) -> int | str:
        spec = request.specifier
        if spec in self.builtins:
            return spec
        if spec.startswith("cloudflare:"):
            known = ", ".join(sorted(self.builtins))
            raise ModuleError(
                f"{request.where}unknown builtin module {spec!r} (celld provides {known})"
            )
        if not (spec.startswith("./") or spec.startswith("../") or spec in (".", "..")):
            raise ModuleError(
                f"{request.where}cannot import {spec!r}: celld loads relative modules "
                "('./x.js', '../lib/y.js') and the cloudflare:* builtins; bundle npm "
                "packages and node: modules into the project first"
            )
        base = importer.path.parent / spec
        found = _resolve_file(base)
        if found is None:
            raise ModuleError(
                f"{request.where}cannot find module {spec!r} (looked for {base.resolve()})"
            )
        return self.load(found)

    def load(self, path: Path) -> int:
        path = path.resolve()
        if path in self.index:
            return self.index[path]
        module = _read_module(path, _display(path, self.root))
        self.index[path] = len(self.modules)
        self.modules.append(module)
        for request in module.requests:
            request.target = self.resolve(request, module)
        for request in module.dynamic:
            request.target = self.resolve(request, module)
        return self.index[path]


def _read_module(path: Path, display: str) -> _Module:
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ModuleError(f"{display}: cannot read module: {error}") from error
    if suffix in _DATA_SUFFIXES:
        return _Module(path, display, "data", value=f"new Uint8Array({list(raw)}).buffer")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise ModuleError(f"{display}: module is not UTF-8 text ({error})") from error
    if suffix == ".json":
        try:
            json.loads(text)
        except ValueError as error:
            line = getattr(error, "lineno", 1)
            col = getattr(error, "colno", 1)
            message = getattr(error, "msg", str(error))
            raise ModuleError(f"{display}:{line}:{col}: invalid JSON: {message}") from error
        return _Module(path, display, "json", value=f"JSON.parse({json.dumps(text)})")
    if suffix in _TEXT_SUFFIXES:
        return _Module(path, display, "text", value=json.dumps(text))
    if suffix == ".wasm":
        raise ModuleError(f"{display}: WebAssembly modules are not supported by celld")
    if suffix in (".cjs", ".cts"):
        raise ModuleError(f"{display}: CommonJS modules are not supported (use ES modules)")
    if suffix not in _SCRIPT_SUFFIXES:
        raise ModuleError(
            f"{display}: unsupported module type {suffix or '(none)'} "
            "(celld loads .js, .mjs, .ts, .mts, .json, .txt, .html, .sql and .bin)"
        )
    typescript = suffix in _TS_SUFFIXES
    if typescript:
        from celld.isolate.typescript import strip_types

        text = strip_types(text, Path(display))
    data = text.encode("utf-8")
    module = _Module(path, display, "script", typescript=typescript, data=data)
    _Analyzer(module, data).run()
    return module


# --------------------------------------------------------------------------- export resolution

_AMBIGUOUS = ("ambiguous",)


class _Exports:
    """ESM export resolution over the loaded graph (ResolveExport / GetExportedNames)."""

    def __init__(self, modules: list[_Module]) -> None:
        self.modules = modules

    def target(self, module: _Module, request: int) -> int | str:
        return module.requests[request].target

    def resolve(self, index: int, name: str, seen: set | None = None) -> tuple | None:
        seen = set() if seen is None else seen
        if (index, name) in seen:
            return None
        seen.add((index, name))
        module = self.modules[index]
        if module.kind != "script":
            return ("local", index, "default") if name == "default" else None
        if name in module.local_exports:
            return ("local", index, module.local_exports[name])
        if name in module.indirect_exports:
            request, import_name, _ = module.indirect_exports[name]
            return self.resolve_in(self.target(module, request), import_name, seen)
        if name == "default":
            return None
        found: tuple | None = None
        for request in module.star_exports:
            target = self.target(module, request)
            if isinstance(target, str):
                continue
            result = self.resolve(target, name, seen)
            if result is _AMBIGUOUS:
                return result
            if result is not None:
                if found is not None and found != result:
                    return _AMBIGUOUS
                found = result
        return found

    def resolve_in(self, target: int | str, name: str, seen: set | None = None) -> tuple | None:
        if isinstance(target, str):
            return ("builtin_ns", target) if name == "*" else ("builtin", target, name)
        if name == "*":
            return ("ns", target)
        result = self.resolve(target, name, seen)
        if result is None and self.builtin_stars(target):
            return ("dynamic", target, name)
        return result

    def names(self, index: int, seen: set[int] | None = None) -> list[str]:
        seen = set() if seen is None else seen
        if index in seen:
            return []
        seen.add(index)
        module = self.modules[index]
        if module.kind != "script":
            return ["default"]
        out = list(module.local_exports) + list(module.indirect_exports)
        for request in module.star_exports:
            target = self.target(module, request)
            if isinstance(target, int):
                out += [n for n in self.names(target, seen) if n != "default"]
        return out

    def builtin_stars(self, index: int, seen: set[int] | None = None) -> list[str]:
        """Builtin modules reachable through `export *` chains (names known only at run time)."""
        seen = set() if seen is None else seen
        if index in seen:
            return []
        seen.add(index)
        module = self.modules[index]
        out: list[str] = []
        for request in module.star_exports:
            target = self.target(module, request)
            if isinstance(target, str):
                out.append(target)
            else:
                out += self.builtin_stars(target, seen)
        return out

    def table(self, index: int) -> list:
        """The namespace table the runtime turns into getters, sorted by export name."""
        rows = []
        for name in sorted(set(self.names(index))):
            result = self.resolve(index, name)
            if result is None or result is _AMBIGUOUS:
                module = self.modules[index]
                if name in module.indirect_exports:
                    request, import_name, where = module.indirect_exports[name]
                    spec = module.requests[request].specifier
                    result = self.resolve_in(module.requests[request].target, import_name)
                    if result is None or result is _AMBIGUOUS:
                        raise ModuleError(
                            _missing_export(where, spec, import_name, result, module.typescript)
                        )
                else:
                    continue
            rows.append([name, *result])
        return rows

    def check_imports(self, module: _Module) -> None:
        for binding in module.imports.values():
            if binding.name == "*":
                continue
            target = module.requests[binding.request].target
            result = self.resolve_in(target, binding.name)
            if result is None or result is _AMBIGUOUS:
                if module.typescript and not binding.used and result is None:
                    continue  # a type imported without `import type`: erased like tsc does
                spec = module.requests[binding.request].specifier
                raise ModuleError(
                    _missing_export(binding.where, spec, binding.name, result, module.typescript)
                )


def _missing_export(
    where: str, spec: str, name: str, result: tuple | None, typescript: bool = False
) -> str:
    if result is _AMBIGUOUS:
        return f"{where}export {name!r} of {spec!r} is ambiguous (several `export *` provide it)"
    hint = " (if it is a type, mark it with `type`)" if typescript else ""
    return f"{where}module {spec!r} has no export named {name!r}{hint}"


# --------------------------------------------------------------------------- code generation

_RUNTIME = """\
(function (__celld_tables, __celld_entry) {
"use strict";
const __celld_W = [], __celld_B = [], __celld_N = [], __celld_S = [], __celld_E = [];
function __celld_builtin(spec, names) {
  const registry = globalThis.__celld_builtin_modules;
  const own = registry != null && Object.prototype.hasOwnProperty.call(registry, spec);
  const ns = own ? registry[spec] : undefined;
  if (ns == null) {
    throw new Error(`Cannot find module '${spec}': this runtime does not provide it`);
  }
  for (const name of names || []) {
    if (!(name in ns)) {
      throw new SyntaxError(
        `The requested module '${spec}' does not provide an export named '${name}'`);
    }
  }
  return ns;
}
function __celld_run(index) {
  const state = __celld_S[index];
  if (state === 0) {
    __celld_S[index] = 1;
    try {
      __celld_W[index].call(undefined);
    } catch (error) {
      __celld_S[index] = 3;
      __celld_E[index] = error;
      throw error;
    }
    __celld_S[index] = 2;
  } else if (state === 3) {
    throw __celld_E[index];
  }
  return __celld_N[index];
}
function __celld_getter(row) {
  const name = row[0], kind = row[1], a = row[2], b = row[3];
  if (kind === "local") {
    return () => {
      const read = __celld_B[a];
      if (read === undefined) {
        throw new ReferenceError(`Cannot access '${name}' before its module is initialized`);
      }
      return read(b);
    };
  }
  if (kind === "ns") return () => __celld_N[a];
  if (kind === "builtin") return () => __celld_builtin(a)[b];
  if (kind === "builtin_ns") return () => __celld_builtin(a);
  return () => __celld_N[a][b];
}
function __celld_namespace(table) {
  const getters = new Map();
  for (const row of table[0]) getters.set(row[0], __celld_getter(row));
  for (const spec of table[1]) {
    for (const name of Object.keys(__celld_builtin(spec))) {
      if (name !== "default" && !getters.has(name)) {
        getters.set(name, () => __celld_builtin(spec)[name]);
      }
    }
  }
  const ns = Object.create(null);
  for (const name of [...getters.keys()].sort()) {
    Object.defineProperty(ns, name, { get: getters.get(name), enumerable: true });
  }
  Object.defineProperty(ns, Symbol.toStringTag, { value: "Module" });
  return Object.freeze(ns);
}
function __celld_dynamic_loader(target) {
  const load = () => typeof target === "number" ? __celld_run(target) : __celld_builtin(target);
  return () => Promise.resolve().then(load);
}
function __celld_nodyn(where, specifier) {
  let shown;
  try {
    shown = JSON.stringify(specifier) ?? String(specifier);
  } catch {
    shown = typeof specifier;
  }
  return Promise.reject(new Error(
    `${where}: import(${shown}) needs a string literal specifier; celld bundles modules ahead`
    + " of time"));
}
"""

_EPILOGUE = """\
for (let i = 0; i < __celld_tables.length; i++) {
  __celld_S.push(0);
  __celld_N.push(__celld_namespace(__celld_tables[i]));
}
globalThis.__celld_main = __celld_run(__celld_entry);
})(__CELLD_TABLES__, 0);
"""


def _advance(text: str, col: int) -> tuple[int, int]:
    """(line breaks in text, column after it) starting from column `col`."""
    breaks = text.count("\n")
    if breaks:
        return breaks, len(text) - text.rfind("\n") - 1
    return 0, col + len(text)


def _apply_splices(
    data: bytes, splices: list[tuple[int, int, str]]
) -> tuple[str, dict[int, tuple[tuple[int, int, bool], ...]]]:
    """Apply byte-range splices; return the text and per-line column anchors (1-based lines).

    Replacements keep the line breaks of what they replace, so line numbers never move;
    only columns after a length-changing splice do, and the anchors record by how much.
    An anchor (out, orig, frozen) says: from output column `out` on, the original column is
    `orig` (frozen: inside generated text) or `orig` plus the distance from `out`.
    """
    pieces: list[str] = []
    anchors: dict[int, list[tuple[int, int, bool]]] = {}
    out_col = orig_col = 0
    line = 1
    pos = 0
    for start, end, text in sorted(splices, key=lambda s: (s[0], s[1])):
        if start < pos:
            raise AssertionError(f"overlapping splices at byte {start}")
        same = data[pos:start].decode("utf-8")
        breaks, _ = _advance(same, 0)
        if breaks:
            line += breaks
            out_col = orig_col = _advance(same, 0)[1]
        else:
            out_col += len(same)
            orig_col += len(same)
        pieces.append(same)
        original = data[start:end].decode("utf-8")
        pieces.append(text)
        shifted = text != _blank(original)
        if shifted:
            anchors.setdefault(line, []).append((out_col, orig_col, True))
        o_breaks, orig_col = _advance(original, orig_col)
        t_breaks, out_col = _advance(text, out_col)
        if o_breaks != t_breaks:
            raise AssertionError("splices must keep line breaks")
        line += o_breaks
        if shifted:
            anchors.setdefault(line, []).append((out_col, orig_col, False))
        pos = end
    pieces.append(data[pos:].decode("utf-8"))
    return "".join(pieces), {k: tuple(v) for k, v in anchors.items()}


def _binding_switch(module: _Module) -> str:
    cases = "".join(
        f"case {json.dumps(local)}: return {local}; "
        for local in sorted(set(module.local_exports.values()))
    )
    return f"(name) => {{ switch (name) {{ {cases}}} }}"


def _prologue(index: int, module: _Module) -> str:
    parts = [f"__celld_B[{index}] = {_binding_switch(module)};"]
    parts += module.prologue_fixups
    namespaces = {b.request: b.local for b in module.imports.values() if b.name == "*"}
    for number, request in enumerate(module.requests):
        target = request.target
        if isinstance(target, str):
            names = sorted(
                {
                    b.name
                    for b in module.imports.values()
                    if b.request == number and b.name != "*" and (b.used or not module.typescript)
                }
            )
            value = f"__celld_builtin({json.dumps(target)}, {json.dumps(names)})"
        else:
            value = f"__celld_run({target})"
        parts.append(f"const __celld_i{number} = {value};")
        if number in namespaces:
            parts.append(f"const {namespaces[number]} = __celld_i{number};")
    if module.dynamic:
        loaders = ", ".join(
            f"__celld_dynamic_loader({json.dumps(r.target)})" for r in module.dynamic
        )
        parts.append(f"const __celld_dynamic = [{loaders}];")
    if module.uses_meta:
        url = json.dumps(module.path.as_uri())
        parts.append(f"const __celld_meta = {{ __proto__: null, url: {url} }};")
    return " ".join(parts)


def _generate(modules: list[_Module], exports: _Exports) -> tuple[str, tuple[_Span, ...]]:
    chunks: list[str] = [_RUNTIME]
    line = _RUNTIME.count("\n") + 1  # the bundle line the next chunk starts on
    spans: list[_Span] = []
    for index, module in enumerate(modules):
        if module.kind != "script":
            chunk = (
                f"__celld_W[{index}] = function () {{ const value = {module.value}; "
                f"__celld_B[{index}] = () => value; }};\n"
            )
        else:
            body, anchors = _apply_splices(module.data, module.splices)
            header = (
                f'__celld_W[{index}] = function () {{ "use strict"; {_prologue(index, module)}\n'
            )
            spans.append(_Span(module.display, line + 1, body.count("\n") + 1, anchors))
            chunk = header + body + ("" if body.endswith("\n") else "\n") + "};\n"
        chunks.append(chunk)
        line += chunk.count("\n")
    tables = [[exports.table(i), exports.builtin_stars(i)] for i in range(len(modules))]
    chunks.append(_EPILOGUE.replace("__CELLD_TABLES__", json.dumps(tables)))
    return "".join(chunks), tuple(spans)


# --------------------------------------------------------------------------- public entry


def bundle_worker(
    entry: Path, *, builtins: Iterable[str] = BUILTIN_MODULES, root: Path | None = None
) -> Bundle:
    """Bundle the ES module graph rooted at `entry` into one classic script.

    `builtins` are the specifiers the runtime provides through
    `globalThis.__celld_builtin_modules`; `root` (default: the working directory) is what
    file paths in errors and `Bundle.locate` are shown relative to.
    """
    entry = Path(entry)
    if not entry.is_file():
        raise ModuleError(f"{entry}: entry module not found")
    linker = _Linker(builtins, root)
    linker.load(entry)
    exports = _Exports(linker.modules)
    for module in linker.modules:
        exports.check_imports(module)
    source, spans = _generate(linker.modules, exports)
    return Bundle(source, tuple(m.path for m in linker.modules), spans)
