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
* modules are evaluated once each, dependencies first (depth-first post-order, found
  with an explicit stack so an import chain of any length loads);
* CommonJS modules (`celld.isolate.commonjs`) become functions of Node's five arguments,
  run when first imported or required, with esbuild's interop for ES module importers.

Specifiers resolve with `celld.isolate.resolver` (relative files and npm packages).
TypeScript files are type-stripped first (see `celld.isolate.typescript`); stripping keeps
every line, so one mapping serves both languages.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Query, QueryCursor

from celld.isolate.async_context import ASYNC_CONTEXT_MODULE, await_splices
from celld.isolate.commonjs import module_format, require_calls
from celld.isolate.decorators import DecoratorError, compile_decorators, has_decorators
from celld.isolate.jsx import JsxError, compile_jsx, has_jsx, parse_copy
from celld.isolate.resolver import ResolveError, Resolver, real_path
from celld.isolate.tsconfig import CompilerSettings, TsConfigError, TsConfigs

BUILTIN_MODULES: frozenset[str] = frozenset(
    {"cloudflare:workers", "cloudflare:workflows", "cloudflare:email"}
)

_JS = Language(tree_sitter_javascript.language())
_TS = Language(tree_sitter_typescript.language_typescript())
_QUERIES: dict[tuple[int, str], Query] = {}


def _query(language: Language, source: str) -> Query:
    """A compiled query, kept per grammar (compiling costs more than running)."""
    key = (id(language), source)
    query = _QUERIES.get(key)
    if query is None:
        query = _QUERIES[key] = Query(language, source)
    return query


def parse_javascript(data: bytes) -> tuple[Language, Node]:
    """Parse JavaScript, falling back to the TypeScript grammar (a superset) when the
    JavaScript grammar fails on valid code it does not know, such as reserved words used
    as export names (`export { x as function }`, which zod ships)."""
    root = Parser(_JS).parse(data).root_node
    if root.has_error:
        fallback = Parser(_TS).parse(data).root_node
        if not fallback.has_error:
            return _TS, fallback
    return _JS, root


_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")
_TS_SUFFIXES = (".ts", ".mts", ".cts", ".tsx")
_TSX = Language(tree_sitter_typescript.language_tsx())
#: The largest single module celld loads. Cloudflare refuses Workers over 10 MB (compressed);
#: parsing is the costly part of loading, so a bigger file is refused before it is read.
MAX_MODULE_BYTES = 10 * 1024 * 1024
#: The largest whole program (all modules together).
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
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

_MISC_SOURCE = """
    (await_expression) @await
    (for_in_statement "await") @for_await
    (return_statement) @return
    (meta_property) @meta
    (call_expression function: (import)) @dynamic
    (decorator) @decorator
    ((member_expression
        object: (member_expression property: (property_identifier) @_env)
        property: (property_identifier) @_name) @node_env
     (#eq? @_env "env") (#eq? @_name "NODE_ENV"))
    """
_PROBLEMS = {
    "top-level await": "top-level await is not supported (celld runs modules as scripts); "
    "move it into a function",
    "return": "return outside of a function",
    "decorator": "decorators are not supported",
}


def node_env() -> str:
    """What `process.env.NODE_ENV` stands for in a bundle (wrangler dev's rule)."""
    return os.environ.get("NODE_ENV") or "development"


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
    #: The builtin modules the graph imports or requires (what the runtime must provide).
    builtins: tuple[str, ...] = ()

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
    target: int | str | dict[str, str] = -1  # module index, builtin specifier, or {"e": why}
    elided: bool = False  # a TypeScript import of types only: never loaded, as with tsc


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
    format: str = "esm"  # "esm" or "cjs" (scripts only)
    data: bytes = b""
    value: str = ""  # JS expression of the default export for non-script modules
    requests: list[_Request] = field(default_factory=list)
    imports: dict[str, _Import] = field(default_factory=dict)
    local_exports: dict[str, str] = field(default_factory=dict)  # export name -> local
    indirect_exports: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    star_exports: list[int] = field(default_factory=list)
    dynamic: list[_Request] = field(default_factory=list)
    requires: list[_Request] = field(default_factory=list)  # require("literal") calls
    import_locals: dict[int, list[str]] = field(default_factory=dict)  # request -> bindings
    defines_require: bool = False  # an ES module with its own top-level `require`
    node_mode: bool = False  # .mjs/.mts or "type": "module": CommonJS default is exports
    splices: list[tuple[int, int, str]] = field(default_factory=list)
    #: every `await` in a function: (start, operand start, end) bytes, for async_context.py
    awaits: list[tuple[int, int, int]] = field(default_factory=list)
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

    def __init__(self, module: _Module, data: bytes, package_type: str = "commonjs") -> None:
        self.m = module
        self.data = data
        self.language, self.root = parse_javascript(data)
        self.package_type = package_type

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
        self.m.format = module_format(
            self.language, self.root, self.m.path.suffix, self.package_type
        )
        for _call, spec in require_calls(self.language, self.root):
            self.m.requires.append(_Request(_string_value(self.data, spec), self.where(spec)))
        if self.m.format == "cjs":
            for node in statements:
                if node.type == "hash_bang_line":
                    self.blank(node)
            self.walk()
            return
        self.m.defines_require = "require" in self.top_level
        # esbuild's "node mode": such an importer sees module.exports itself as the default
        # export of a CommonJS module, even one marked `__esModule`
        self.m.node_mode = (
            self.m.path.suffix.lower() in (".mjs", ".mts") or self.package_type == "module"
        )
        for node in statements:
            if node.type == "import_statement":
                self.import_statement(node)
            elif node.type == "hash_bang_line":
                self.blank(node)
        for node in statements:
            if node.type == "export_statement":
                self.export_statement(node)
        self.walk()
        if self.m.typescript:
            for request, locals_ in self.m.import_locals.items():
                if locals_ and not any(self.m.imports[name].used for name in locals_):
                    self.m.requests[request].elided = True

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
        before = set(self.m.imports)
        for clause in node.named_children:
            if clause.type == "import_clause":
                self.import_clause(clause, index)
        self.m.import_locals[index] = [n for n in self.m.imports if n not in before]
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
        captures = QueryCursor(_query(self.language, _MISC_SOURCE)).captures(self.root)
        problems = [(n, "top-level await") for n in captures.get("await", [])]
        problems += [(n, "top-level await") for n in captures.get("for_await", [])]
        problems += [(n, "return") for n in captures.get("return", [])]
        problems = [(n, what) for n, what in problems if _enclosing(n, _FUNCTIONS) is None]
        if self.m.format == "cjs":  # a CommonJS body is a function: `return` is allowed
            problems = [(n, what) for n, what in problems if what != "return"]
        problems += [(n, "decorator") for n in captures.get("decorator", [])]
        if problems:
            node, what = min(problems, key=lambda item: item[0].start_byte)
            raise ModuleError(self.where(node) + _PROBLEMS[what])
        self.define_node_env(captures.get("node_env", []))
        for node in captures.get("await", []):
            operand = node.named_children[-1] if node.named_children else None
            if operand is not None:
                self.m.awaits.append((node.start_byte, operand.start_byte, node.end_byte))
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

    def define_node_env(self, nodes: list[Node]) -> None:
        """`process.env.NODE_ENV` (also through `global.` or `globalThis.`) is a string
        constant, as wrangler's esbuild `define` makes it: `NODE_ENV` of the environment
        celld runs in, else "development". Libraries such as React choose their build by it
        and would otherwise need a `process` global that Workers do not have."""
        if "process" in self.top_level or "process" in self.m.imports:
            return  # the module's own `process`, which a define does not replace
        for node in nodes:
            holder = node.child_by_field_name("object")
            target = holder.child_by_field_name("object") if holder is not None else None
            if target is None or _text(self.data, target).replace(" ", "") not in (
                "process",
                "global.process",
                "globalThis.process",
            ):
                continue
            parent = node.parent
            if parent is not None and (
                parent.type == "update_expression"
                or (
                    parent.type in ("assignment_expression", "augmented_assignment_expression")
                    and parent.child_by_field_name("left") == node
                )
            ):
                continue  # written to: not a use esbuild replaces
            self.splice(node, None, json.dumps(node_env()))

    def rewrite_references(self, replaced: list[tuple[int, int]]) -> None:
        """Turn every use of an imported name into a read of the exporter's namespace."""
        imported = {k: v for k, v in self.m.imports.items() if v.name != "*" or self.m.typescript}
        if not imported:
            return
        if len(self.data) < _SMALL_MODULE:
            # compiling a query costs more than filtering a small module's identifiers
            wanted = {name.encode("utf-8") for name in imported}
            found = QueryCursor(_query(self.language, _IDENTIFIERS)).captures(self.root)
            nodes = [n for n in found.get("id", []) if n.text in wanted]
            nodes.sort(key=lambda n: n.start_byte)
        else:
            query = _reference_query(self.language, tuple(sorted(imported)))
            nodes = QueryCursor(query).captures(self.root).get("id", [])
        starts = [start for start, _ in replaced]
        occurrences = []
        declared: dict[int, set[str]] = {}
        for node in nodes:
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
        if binding.name == "*":
            return  # a namespace is a plain local; TypeScript only needs to know it is used
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


#: Modules smaller than this find imported names among all their identifiers.
_SMALL_MODULE = 24 * 1024
_IDENTIFIERS = (
    "(identifier) @id\n(shorthand_property_identifier) @id\n"
    "(shorthand_property_identifier_pattern) @id"
)


@lru_cache(maxsize=512)
def _reference_query(language: Language, names: tuple[str, ...]) -> Query:
    """The query finding uses of `names` (compiled once per set: compiling costs ~1 ms)."""
    listed = " ".join(json.dumps(name) for name in names)
    return Query(
        language,
        f"((identifier) @id (#any-of? @id {listed}))\n"
        f"((shorthand_property_identifier) @id (#any-of? @id {listed}))\n"
        f"((shorthand_property_identifier_pattern) @id (#any-of? @id {listed}))",
    )


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


#: Node's own modules, for telling a missing `nodejs_compat` flag from a missing package.
NODE_CORE_MODULES = frozenset(
    [
        "assert",
        "assert/strict",
        "async_hooks",
        "buffer",
        "child_process",
        "cluster",
        "console",
        "constants",
        "crypto",
        "dgram",
        "diagnostics_channel",
        "dns",
        "dns/promises",
        "domain",
        "events",
        "fs",
        "fs/promises",
        "http",
        "http2",
        "https",
        "inspector",
        "module",
        "net",
        "os",
        "path",
        "path/posix",
        "path/win32",
        "perf_hooks",
        "process",
        "punycode",
        "querystring",
        "readline",
        "repl",
        "stream",
        "stream/promises",
        "stream/web",
        "string_decoder",
        "sys",
        "timers",
        "timers/promises",
        "tls",
        "trace_events",
        "tty",
        "url",
        "util",
        "util/types",
        "v8",
        "vm",
        "wasi",
        "worker_threads",
        "zlib",
        "test",
        "sqlite",
    ]
)


class _Linker:
    """Loads the module graph from the entry, assigning indexes in discovery order.

    The walk keeps its own work list (never Python recursion), so a graph of any depth
    loads; each file is read and analysed once.
    """

    def __init__(
        self,
        builtins: Iterable[str],
        root: Path | None,
        nodejs_compat: bool = False,
        tsconfigs: TsConfigs | None = None,
    ) -> None:
        self.tsconfigs = tsconfigs or TsConfigs()
        self.builtins = frozenset(builtins)
        self.root = root
        self.nodejs_compat = nodejs_compat
        self.modules: list[_Module] = []
        self.index: dict[Path, int] = {}
        self.resolver = Resolver()
        self.total_bytes = 0

    def builtin(self, spec: str, where: str) -> str | None:
        """The builtin `spec` names, None when it is not a builtin; raise when unavailable."""
        if spec in self.builtins:
            return spec
        name = spec.removeprefix("node:")
        if spec.startswith("node:") or (self.nodejs_compat and name in NODE_CORE_MODULES):
            if f"node:{name}" in self.builtins:
                return f"node:{name}"
            if not self.nodejs_compat:
                raise ModuleError(
                    f"{where}cannot import {spec!r}: Node.js modules need "
                    'compatibility_flags = ["nodejs_compat"] in the wrangler config'
                )
            provided = sorted(b for b in self.builtins if b.startswith("node:"))
            raise ModuleError(
                f"{where}celld does not provide the Node.js module {spec!r} "
                f"(with nodejs_compat it provides {', '.join(provided) or 'none'})"
            )
        if spec.startswith("cloudflare:"):
            known = ", ".join(sorted(b for b in self.builtins if b.startswith("cloudflare:")))
            raise ModuleError(f"{where}unknown builtin module {spec!r} (celld provides {known})")
        return None

    def resolve(self, request: _Request, importer: _Module, kind: str) -> int | str:
        spec = request.specifier
        found = self.builtin(spec, request.where)
        if found is not None:
            return found
        try:
            path = self.resolver.resolve(spec, importer.path, kind)
        except ResolveError as error:
            name = spec.removeprefix("node:").split("/")[0]
            if not self.nodejs_compat and name in NODE_CORE_MODULES:
                raise ModuleError(
                    f"{request.where}cannot import {spec!r}: it is a Node.js module; add "
                    'compatibility_flags = ["nodejs_compat"] to the wrangler config'
                ) from None
            raise ModuleError(f"{request.where}{error}") from None
        return self.add(path)

    def add(self, path: Path) -> int:
        """The index of the module at `path`, reading and analysing it the first time."""
        path = real_path(path)
        if path in self.index:
            return self.index[path]
        suffix = path.suffix.lower()
        scripts = (".js", ".ts", ".jsx", ".tsx")
        package = self.resolver.package_of(path) if suffix in scripts else None
        settings = None
        if suffix in _SCRIPT_SUFFIXES:
            try:
                settings = self.tsconfigs.settings_for(path)
            except TsConfigError as error:
                raise ModuleError(str(error)) from None
        module = _read_module(
            path, _display(path, self.root), package.type if package else "commonjs", settings
        )
        self.total_bytes += len(module.data) + len(module.value)
        if self.total_bytes > MAX_BUNDLE_BYTES:
            raise ModuleError(
                f"{module.display}: the Worker's modules exceed {MAX_BUNDLE_BYTES // 2**20} MiB "
                "together; celld refuses programs that large"
            )
        self.index[path] = len(self.modules)
        self.modules.append(module)
        self.pending.append(module)
        return self.index[path]

    def load(self, entry: Path) -> int:
        """Load `entry` and everything it reaches; return the entry's index."""
        self.pending: list[_Module] = []
        first = self.add(entry)
        while self.pending:
            module = self.pending.pop()
            for request in module.requests:
                if not request.elided:
                    request.target = self.resolve(request, module, "import")
            for request in module.dynamic:
                request.target = self.resolve(request, module, "import")
            for request in module.requires:
                # As in Node, a require that cannot be satisfied fails when it runs, so
                # optional dependencies behind try/catch keep working.
                try:
                    request.target = self.resolve(request, module, "require")
                except ModuleError as error:
                    request.target = {"e": str(error)}
        return first


def _compile_jsx(
    data: bytes, suffix: str, display: str, package_type: str, settings: CompilerSettings
) -> bytes:
    """`data` with its JSX compiled (see `celld.isolate.jsx`); as under wrangler, JSX is
    allowed in every script, not only in `.jsx` and `.tsx` files."""
    if suffix not in (".jsx", ".tsx") and b"</" not in data and b"/>" not in data:
        return data  # every JSX element has a closing tag or ends with `/>`
    language = _TSX if suffix == ".tsx" else _JS
    copy = parse_copy(data)
    root = Parser(language).parse(copy).root_node
    if not has_jsx(language, root):
        return data
    if root.has_error and language is _JS:
        # tree-sitter's JavaScript grammar fails on some valid JSX (`<div class="a">`, a
        # reserved word as attribute name); its TSX grammar reads JavaScript with JSX too
        fallback = Parser(_TSX).parse(copy).root_node
        if not fallback.has_error:
            language, root = _TSX, fallback
    check_syntax(root, data, display)
    commonjs = module_format(language, root, suffix, package_type) == "cjs"
    try:
        text = compile_jsx(data, root, language, display, settings.jsx, commonjs=commonjs)
    except JsxError as error:
        raise ModuleError(str(error)) from None
    return text.encode("utf-8")


def _read_module(
    path: Path,
    display: str,
    package_type: str = "commonjs",
    settings: CompilerSettings | None = None,
) -> _Module:
    suffix = path.suffix.lower()
    settings = settings or CompilerSettings()
    try:
        size = path.stat().st_size
        if size > MAX_MODULE_BYTES:
            raise ModuleError(
                f"{display}: module is {size:,} bytes; celld refuses modules over "
                f"{MAX_MODULE_BYTES // 2**20} MiB (Cloudflare limits a whole Worker to 10 MB)"
            )
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
    if suffix not in _SCRIPT_SUFFIXES:
        raise ModuleError(
            f"{display}: unsupported module type {suffix or '(none)'} (celld loads .js, .mjs, "
            ".cjs, .jsx, .ts, .mts, .cts, .tsx, .json, .txt, .html, .sql and .bin)"
        )
    typescript = suffix in _TS_SUFFIXES
    if typescript:
        from celld.isolate.typescript import strip_types

        text = strip_types(text, Path(display))
    data = _compile_jsx(text.encode("utf-8"), suffix, display, package_type, settings)
    if has_decorators(data):
        # experimentalDecorators is TypeScript's; JavaScript files get the standard ones
        legacy = typescript and settings.experimental_decorators
        try:
            data = compile_decorators(data, display, legacy=legacy)
        except DecoratorError as error:
            raise ModuleError(str(error)) from None
    module = _Module(path, display, "script", typescript=typescript, data=data)
    _Analyzer(module, data, package_type).run()
    return module


# --------------------------------------------------------------------------- export resolution

_AMBIGUOUS = ("ambiguous",)


def _trampoline(generator: Generator[Any, Any, Any]) -> Any:
    """Run a recursive generator without Python recursion: each `yield g` calls `g`.

    Export chains (`export * from`) can be as long as the module graph, which may be far
    deeper than Python's recursion limit.
    """
    stack = [generator]
    value: Any = None
    while stack:
        try:
            call = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            value = done.value
            continue
        stack.append(call)
        value = None
    return value


class _Exports:
    """ESM export resolution over the loaded graph (ResolveExport / GetExportedNames).

    A CommonJS module's names are only known once it has run, so every name resolves to a
    run-time read of its namespace, as esbuild's interop does.
    """

    def __init__(self, modules: list[_Module]) -> None:
        self.modules = modules
        self.memo: dict[tuple[int, str], tuple | None] = {}
        self.cuts = 0  # times a cycle cut a search short; results that saw one are not kept

    def target(self, module: _Module, request: int) -> int | str | dict[str, str]:
        return module.requests[request].target

    def resolve(self, index: int, name: str, seen: set | None = None) -> tuple | None:
        return _trampoline(self._resolve(index, name, set() if seen is None else seen))

    def _resolve(self, index: int, name: str, seen: set) -> Generator[Any, Any, tuple | None]:
        key = (index, name)
        if key in self.memo:
            return self.memo[key]
        if key in seen:
            self.cuts += 1
            return None
        seen.add(key)
        cuts = self.cuts
        result = yield self._resolve_uncached(index, name, seen)
        if self.cuts == cuts:
            self.memo[key] = result
        return result

    def _resolve_uncached(
        self, index: int, name: str, seen: set
    ) -> Generator[Any, Any, tuple | None]:
        module = self.modules[index]
        if module.kind != "script":
            return ("local", index, "default") if name == "default" else None
        if module.format == "cjs":
            return ("dynamic", index, name)
        if name in module.local_exports:
            return ("local", index, module.local_exports[name])
        if name in module.indirect_exports:
            request, import_name, _ = module.indirect_exports[name]
            return (yield self._resolve_in(self.target(module, request), import_name, seen))
        if name == "default":
            return None
        found: tuple | None = None
        for request in module.star_exports:
            target = self.target(module, request)
            if not isinstance(target, int) or self.modules[target].format == "cjs":
                continue
            other = self.modules[target]
            if (
                other.kind == "script"
                and not other.star_exports
                and name not in other.local_exports
                and name not in other.indirect_exports
            ):
                continue  # cannot provide it (the common case under `export *` fan-outs)
            result = yield self._resolve(target, name, seen)
            if result is _AMBIGUOUS:
                return result
            if result is not None:
                if found is not None and found != result:
                    return _AMBIGUOUS
                found = result
        return found

    def resolve_in(self, target: Any, name: str, seen: set | None = None) -> tuple | None:
        return _trampoline(self._resolve_in(target, name, set() if seen is None else seen))

    def _resolve_in(self, target: Any, name: str, seen: set) -> Generator[Any, Any, tuple | None]:
        if isinstance(target, str):
            return ("builtin_ns", target) if name == "*" else ("builtin", target, name)
        if name == "*":
            return ("ns", target)
        result = yield self._resolve(target, name, seen)
        if result is None and self.runtime_stars(target):
            return ("dynamic", target, name)
        return result

    def _walk_stars(self, index: int) -> list[int]:
        """Modules reachable from `index` through `export *`, `index` first (no recursion)."""
        order: list[int] = []
        seen = {index}
        stack = [index]
        while stack:
            current = stack.pop()
            order.append(current)
            module = self.modules[current]
            if module.format == "cjs":
                continue
            for request in reversed(module.star_exports):
                target = self.target(module, request)
                if isinstance(target, int) and target not in seen:
                    seen.add(target)
                    stack.append(target)
        return order

    def names(self, index: int) -> list[str]:
        out: list[str] = []
        for current in self._walk_stars(index):
            module = self.modules[current]
            if module.kind != "script":
                names = ["default"]
            elif module.format == "cjs":
                names = []
            else:
                names = list(module.local_exports) + list(module.indirect_exports)
            out += names if current == index else [n for n in names if n != "default"]
        return out

    def runtime_stars(self, index: int) -> list[str | int]:
        """What `export *` chains reach whose names are known only at run time: builtin
        modules (by specifier) and CommonJS modules (by index)."""
        out: list[str | int] = []
        for current in self._walk_stars(index):
            module = self.modules[current]
            if current != index and module.format == "cjs":
                out.append(current)
            if module.format == "cjs":
                continue
            for request in module.star_exports:
                target = self.target(module, request)
                if isinstance(target, str):
                    out.append(target)
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
            if binding.name == "*" or module.requests[binding.request].elided:
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
(function (__celld_tables, __celld_deps, __celld_scc, __celld_kinds) {
const __celld_W = [], __celld_B = [], __celld_N = [], __celld_S = [], __celld_E = [];
const __celld_M = [], __celld_NN = [];
function __celld_builtin(spec, names) {
  "use strict";
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
function __celld_enter(index) {
  "use strict";
  // ESM evaluation of one module: its prologue enters its imports first, so inside an
  // import cycle a module's hoisted functions exist before the others run.
  const state = __celld_S[index];
  if (state === 0) {
    __celld_S[index] = 1;
    const body = __celld_W[index];
    try {
      body();
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
function __celld_run(root) {
  "use strict";
  // Evaluate `root` and its static imports. Their post-order is found with an explicit
  // stack and each module is entered in that order, so an import chain of any length
  // never deepens the JavaScript stack; only the first-reached module of an import cycle
  // is entered directly, and the rest of its cycle runs through it as ESM says.
  if (__celld_S[root] === 0) {
    const order = [], stack = [[root, 0]], seen = new Set([root]);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const deps = __celld_deps[top[0]];
      if (top[1] < deps.length) {
        const dep = deps[top[1]++];
        if (__celld_S[dep] === 0 && !seen.has(dep)) {
          seen.add(dep);
          stack.push([dep, 0]);
        }
      } else {
        stack.pop();
        order.push(top[0]);
      }
    }
    const last = new Map();
    for (let i = 0; i < order.length; i++) last.set(__celld_scc[order[i]], i);
    for (let i = 0; i < order.length; i++) {
      if (last.get(__celld_scc[order[i]]) === i) __celld_enter(order[i]);
    }
  }
  return __celld_enter(root);
}
function __celld_getter(row) {
  "use strict";
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
  "use strict";
  const getters = new Map();
  for (const row of table[0]) getters.set(row[0], __celld_getter(row));
  for (const spec of table[1]) {
    const source = typeof spec === "number" ? __celld_N[spec] ?? {} : __celld_builtin(spec);
    for (const name of Object.keys(source)) {
      if (name !== "default" && !getters.has(name)) {
        getters.set(name, typeof spec === "number"
          ? () => __celld_N[spec][name] : () => __celld_builtin(spec)[name]);
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
function __celld_node_ns(index) {
  "use strict";
  // The namespace a node-mode importer sees (default = module.exports, always).
  __celld_enter(index);
  const module = __celld_M[index];
  if (module === undefined || !module.loaded) return __celld_N[index];  // inside a cycle
  if (__celld_NN[index] === undefined) {
    __celld_NN[index] = __celld_cjs_namespace(module.exports, true);
  }
  return __celld_NN[index];
}
function __celld_cjs_namespace(value, nodeMode) {
  "use strict";
  // esbuild's interop: every own property is a named export; `default` is module.exports
  // itself unless the module says it was compiled from ESM (`__esModule`).
  const ns = Object.create(null);
  const object = value !== null && (typeof value === "object" || typeof value === "function");
  if (nodeMode || !object || !value.__esModule) {
    Object.defineProperty(ns, "default", { value, enumerable: true });
  }
  if (object) {
    for (const name of Object.getOwnPropertyNames(value)) {
      if (name in ns) continue;
      Object.defineProperty(ns, name, { get: () => value[name], enumerable: true });
    }
  }
  Object.defineProperty(ns, Symbol.toStringTag, { value: "Module" });
  return Object.freeze(ns);
}
function __celld_required(target) {
  "use strict";
  const kind = __celld_kinds[target];
  if (kind === "cjs") {
    if (__celld_S[target] === 1) return __celld_M[target].exports;  // a require cycle
    __celld_enter(target);  // CommonJS has no static imports to run first
    return __celld_M[target].exports;
  }
  if (kind === "value") {
    __celld_run(target);
    return __celld_B[target]();
  }
  return __celld_run(target);
}
function __celld_require(targets, filename) {
  "use strict";
  const require = function require(specifier) {
    if (typeof specifier !== "string") {
      throw new TypeError("require() needs a string specifier");
    }
    if (!Object.prototype.hasOwnProperty.call(targets, specifier)) {
      const error = new Error(`Cannot find module '${specifier}' from '${filename}': celld `
        + "resolves require() calls with a string literal ahead of time");
      error.code = "MODULE_NOT_FOUND";
      throw error;
    }
    const target = targets[specifier];
    if (typeof target === "number") {
      if (__celld_kinds[target] === "cjs") {  // the common case, kept shallow
        if (__celld_S[target] !== 1) __celld_enter(target);
        return __celld_M[target].exports;  // (a require cycle sees exports so far)
      }
      return __celld_required(target);
    }
    if (typeof target === "string") {
      // Node's own modules are their default export when required (`require("events")`
      // is EventEmitter itself)
      const ns = __celld_builtin(target);
      return target.startsWith("node:") && ns.default !== undefined ? ns.default : ns;
    }
    const error = new Error(target.e);
    error.code = "MODULE_NOT_FOUND";
    throw error;
  };
  require.cache = Object.create(null);
  return require;
}
function __celld_cjs(index, targets, filename, body) {
  "use strict";
  // The module function of a CommonJS module: runs its body with Node's five arguments.
  return () => {
    const module = {
      exports: {}, id: filename, filename, loaded: false, children: [], paths: [],
    };
    module.require = __celld_require(targets, filename);
    __celld_M[index] = module;
    __celld_B[index] = () => module.exports;
    const dirname = filename.includes("/") ? filename.slice(0, filename.lastIndexOf("/")) : ".";
    body.call(module.exports, module.exports, module.require, module, filename, dirname);
    module.loaded = true;
    __celld_N[index] = __celld_cjs_namespace(module.exports);
  };
}
function __celld_dynamic_loader(target) {
  "use strict";
  const load = () => typeof target === "number" ? __celld_run(target) : __celld_builtin(target);
  return () => Promise.resolve().then(load);
}
function __celld_nodyn(where, specifier) {
  "use strict";
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
// node:module's createRequire loads the bundle's modules by index (js/node/module.js)
if (globalThis.__celld_node !== undefined) globalThis.__celld_node.required = __celld_required;
globalThis.__celld_main = __celld_run(0);
})(__CELLD_TABLES__, __CELLD_DEPS__, __CELLD_SCC__, __CELLD_KINDS__);
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


def _require_targets(module: _Module) -> str:
    targets: dict[str, Any] = {}
    for request in module.requires:
        targets.setdefault(request.specifier, request.target)
    return json.dumps(targets)


def _prologue(index: int, module: _Module, rebuild: bool, kinds: list[str]) -> str:
    parts = [f"__celld_B[{index}] = {_binding_switch(module)};"]
    parts += module.prologue_fixups
    namespaces = {b.request: b.local for b in module.imports.values() if b.name == "*"}
    for number, request in enumerate(module.requests):
        if request.elided:
            continue
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
            value = f"__celld_enter({target})"
            if module.node_mode and kinds[target] == "cjs":
                value = f"__celld_node_ns({target})"
        parts.append(f"const __celld_i{number} = {value};")
        if number in namespaces:
            parts.append(f"const {namespaces[number]} = __celld_i{number};")
    if rebuild:  # `export *` of CommonJS: its names exist now that it has run
        parts.append(f"__celld_N[{index}] = __celld_namespace(__celld_tables[{index}]);")
    parts += _shared_prologue(module)
    if module.requires and not module.defines_require and "require" not in module.imports:
        filename = json.dumps(module.display)
        parts.append(f"const require = __celld_require({_require_targets(module)}, {filename});")
    return " ".join(parts)


def _shared_prologue(module: _Module) -> list[str]:
    """What both module formats declare before their body: dynamic import and import.meta."""
    parts = []
    if module.dynamic:
        loaders = ", ".join(
            f"__celld_dynamic_loader({json.dumps(r.target)})" for r in module.dynamic
        )
        parts.append(f"const __celld_dynamic = [{loaders}];")
    if module.uses_meta:
        url = json.dumps(module.path.as_uri())
        parts.append(f"const __celld_meta = {{ __proto__: null, url: {url} }};")
    return parts


def _static_deps(module: _Module) -> list[int]:
    """The modules `module` imports statically, in source order (what runs before it)."""
    if module.kind != "script":
        return []
    return [r.target for r in module.requests if not r.elided and isinstance(r.target, int)]


def _components(deps: list[list[int]]) -> list[int]:
    """Strongly connected component id of each module (Tarjan's algorithm, iterative)."""
    count = len(deps)
    number = [-1] * count
    low = [0] * count
    component = [-1] * count
    on_stack = [False] * count
    stack: list[int] = []
    counter = 0
    components = 0
    for start in range(count):
        if number[start] != -1:
            continue
        work = [(start, 0)]
        number[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack[start] = True
        while work:
            node, at = work[-1]
            if at < len(deps[node]):
                work[-1] = (node, at + 1)
                nxt = deps[node][at]
                if number[nxt] == -1:
                    number[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], number[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == number[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component


def _kind(module: _Module) -> str:
    if module.kind != "script":
        return "value"
    return module.format


def _generate(modules: list[_Module], exports: _Exports) -> tuple[str, tuple[_Span, ...]]:
    chunks: list[str] = [_RUNTIME]
    line = _RUNTIME.count("\n") + 1  # the bundle line the next chunk starts on
    spans: list[_Span] = []
    tables = [[exports.table(i), exports.runtime_stars(i)] for i in range(len(modules))]
    kinds = [_kind(m) for m in modules]
    for index, module in enumerate(modules):
        if module.kind != "script":
            chunk = (
                f"__celld_W[{index}] = function () {{ const value = {module.value}; "
                f"__celld_B[{index}] = () => value; }};\n"
            )
        else:
            body, anchors = _apply_splices(module.data, module.splices)
            if module.format == "cjs":
                header = (
                    f"__celld_W[{index}] = (() => {{ {' '.join(_shared_prologue(module))} "
                    f"return __celld_cjs({index}, {_require_targets(module)}, "
                    f"{json.dumps(module.display)}, "
                    "function (exports, require, module, __filename, __dirname) {\n"
                )
                footer = "}); })();\n"
            else:
                rebuild = any(isinstance(t, int) for t in tables[index][1])
                header = (
                    f"__celld_W[{index}] = function () {{ "
                    f'"use strict"; {_prologue(index, module, rebuild, kinds)}\n'
                )
                footer = "};\n"
            spans.append(_Span(module.display, line + 1, body.count("\n") + 1, anchors))
            chunk = header + body + ("" if body.endswith("\n") else "\n") + footer
        chunks.append(chunk)
        line += chunk.count("\n")
    deps = [_static_deps(m) for m in modules]
    epilogue = (
        _EPILOGUE.replace("__CELLD_TABLES__", json.dumps(tables))
        .replace("__CELLD_DEPS__", json.dumps(deps))
        .replace("__CELLD_SCC__", json.dumps(_components(deps)))
        .replace("__CELLD_KINDS__", json.dumps(kinds))
    )
    chunks.append(epilogue)
    return "".join(chunks), tuple(spans)


# --------------------------------------------------------------------------- public entry


def bundle_worker(
    entry: Path,
    *,
    builtins: Iterable[str] = BUILTIN_MODULES,
    root: Path | None = None,
    nodejs_compat: bool = False,
    tsconfigs: TsConfigs | None = None,
) -> Bundle:
    """Bundle the module graph rooted at `entry` into one classic script.

    `builtins` are the specifiers the runtime provides through
    `globalThis.__celld_builtin_modules`; `root` (default: the working directory) is what
    file paths in errors and `Bundle.locate` are shown relative to; `nodejs_compat` lets
    bare Node.js module names (`buffer`) mean the `node:` builtins; `tsconfigs` carries
    wrangler's `tsconfig`, `jsx_factory` and `jsx_fragment` (default: none set).
    """
    return build_bundle(
        entry, builtins=builtins, root=root, nodejs_compat=nodejs_compat, tsconfigs=tsconfigs
    )[0]


def build_bundle(
    entry: Path,
    *,
    builtins: Iterable[str] = BUILTIN_MODULES,
    root: Path | None = None,
    nodejs_compat: bool = False,
    tsconfigs: TsConfigs | None = None,
) -> tuple[Bundle, list[Path]]:
    """`bundle_worker`, also returning the package.json and tsconfig files it read (what a
    cache of the bundle must watch besides the modules themselves)."""
    entry = Path(entry)
    if not entry.is_file():
        raise ModuleError(f"{entry}: entry module not found")
    tsconfigs = tsconfigs or TsConfigs()
    linker = _Linker(builtins, root, nodejs_compat, tsconfigs)
    linker.load(entry)
    exports = _Exports(linker.modules)
    for module in linker.modules:
        exports.check_imports(module)
    used = {
        request.target
        for module in linker.modules
        for request in (*module.requests, *module.dynamic, *module.requires)
        if isinstance(request.target, str) and not request.elided
    }
    if ASYNC_CONTEXT_MODULE in used:
        for module in linker.modules:
            module.splices.extend(await_splices(module.awaits, module.splices))
    source, spans = _generate(linker.modules, exports)
    bundle = Bundle(source, tuple(m.path for m in linker.modules), spans, tuple(sorted(used)))
    packages = [info.path for info in linker.resolver.packages.values() if info is not None]
    return bundle, packages + sorted(tsconfigs.files)
