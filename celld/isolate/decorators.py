"""Decorators compiled as esbuild compiles them for wrangler, keeping every line in place.

Two kinds, chosen as esbuild chooses: TypeScript's `experimentalDecorators` (tsconfig; for
TypeScript files) and otherwise the standard (TC39, 2023) ones. QuickJS runs neither, so each
decorated class is rewritten in place:

* every decorator expression `@expr` becomes a function `() => (expr)` where it stands, so
  it is evaluated when the decorators are applied (as in esbuild's output) and multi-line
  decorators keep their lines;
* a decorated member's key becomes a computed key that records the member (its kind,
  `static`, its decorators) with a per-class record `__celld_dN` and returns the key;
* experimentalDecorators: after the class, `A = __celld_dN.run(A)` applies them with
  TypeScript's `__decorate` rules (members in order, instance ones first, then the class;
  parameter decorators, which must be written on one line, before their method's own);
* standard: a static block first in the class body applies member decorators (static then
  instance methods and accessors, then fields) and class decorators before any static field
  is initialised, a private field first among the instance fields runs the instance
  initializers `addInitializer` added, decorated fields' initial values go through the
  initializers their decorators returned, and a last static block runs the class's own
  initializers; the class decorators' result replaces the class binding after it.

The helper that does this (`__celld_dec`, plain JavaScript) is appended to the module.
Decorators on private members (`#x`) and on `accessor` fields are refused with their
position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Query, QueryCursor

_TS = Language(tree_sitter_typescript.language_typescript())
_JS = Language(tree_sitter_javascript.language())
_QUERIES = {id(_TS): Query(_TS, "(decorator) @d"), id(_JS): Query(_JS, "(decorator) @d")}
_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
_MODIFIERS = frozenset({"static", "async", "get", "set", "*", "accessor"})
_KIND = {"method": 1, "getter": 2, "setter": 3, "field": 5}


class DecoratorError(Exception):
    """A decorator celld cannot compile; the message starts with `path:line:column: `."""


@dataclass
class _Edits:
    data: bytes
    display: str
    edits: list[tuple[int, int, str]] = field(default_factory=list)

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")

    def insert(self, at: int, text: str) -> None:
        self.edits.append((at, at, text))

    def replace(self, node: Node, text: str) -> None:
        if b"\n" in self.data[node.start_byte : node.end_byte]:
            text += "\n" * self.data[node.start_byte : node.end_byte].count(b"\n")
        self.edits.append((node.start_byte, node.end_byte, text))

    def blank(self, node: Node) -> None:
        original = self.text(node)
        self.edits.append(
            (node.start_byte, node.end_byte, "".join(c if c in "\r\n" else " " for c in original))
        )

    def fail(self, node: Node, what: str) -> None:
        from celld.isolate.modules import format_position

        raise DecoratorError(f"{format_position(self.display, self.data, node)}{what}")

    def apply(self) -> str:
        out: list[str] = []
        pos = 0
        # insertions before a replacement at the same byte, in the order they were made
        ordered = sorted(enumerate(self.edits), key=lambda e: (e[1][0], e[1][1] != e[1][0], e[0]))
        for _, (start, end, text) in ordered:
            if start < pos:
                raise DecoratorError(f"{self.display}: overlapping decorator rewrites at {start}")
            out.append(self.data[pos:start].decode("utf-8"))
            out.append(text)
            pos = end
        out.append(self.data[pos:].decode("utf-8"))
        return "".join(out)


def has_decorators(data: bytes) -> bool:
    """A quick test before parsing: a decorator needs an `@`."""
    return b"@" in data


def compile_decorators(data: bytes, display: str, *, legacy: bool) -> bytes:
    """`data` (JavaScript, types already stripped) with its decorators compiled; unchanged
    when it has none. `legacy` selects TypeScript's experimentalDecorators."""
    language = _TS
    root = Parser(_TS).parse(data).root_node
    if root.has_error:
        # JavaScript the TypeScript grammar misreads (`a < b > (c)`) must not be refused
        fallback = Parser(_JS).parse(data).root_node
        if not fallback.has_error:
            language, root = _JS, fallback
    found = QueryCursor(_QUERIES[id(language)]).captures(root).get("d", [])
    if not found:
        return data
    from celld.isolate.modules import check_syntax

    check_syntax(root, data, display)
    edits = _Edits(data, display)
    classes: dict[int, Node] = {}
    for decorator in found:
        klass = decorator.parent
        if klass is not None and klass.type == "export_statement":
            klass = klass.child_by_field_name("declaration") or klass.child_by_field_name("value")
        while klass is not None and klass.type not in _CLASSES:
            klass = klass.parent
        if klass is None:
            edits.fail(decorator, "a decorator must be on a class or one of its members")
            continue
        classes.setdefault(klass.id, klass)
    for number, klass in enumerate(sorted(classes.values(), key=lambda k: k.start_byte)):
        _Class(edits, klass, f"__celld_d{number}", legacy).compile()
    names = ", ".join(f"__celld_d{n}" for n in range(len(classes)))
    tail = f"\nvar {names}; {_HELPER}"
    return (edits.apply() + tail).encode("utf-8")


class _Class:
    def __init__(self, edits: _Edits, klass: Node, record: str, legacy: bool) -> None:
        self.e = edits
        self.klass = klass
        self.record = record
        self.legacy = legacy

    def compile(self) -> None:
        klass, e = self.klass, self.e
        body = klass.child_by_field_name("body")
        assert body is not None
        parent = klass.parent
        statement = parent if parent is not None and parent.type == "export_statement" else None
        decorators = [c for c in klass.children if c.type == "decorator"]
        if statement is not None:
            decorators = [c for c in statement.children if c.type == "decorator"] + decorators
        members = self.members(body)
        constructor_params: list[str] = []
        for member, _ in members:
            name = member.child_by_field_name("name")
            if member.type == "method_definition" and name and e.text(name) == "constructor":
                constructor_params = self.parameters(member)
        name = klass.child_by_field_name("name")
        keyword = next(c for c in klass.children if c.type == "class")
        default = statement is not None and any(c.type == "default" for c in statement.children)
        declaration = klass.type != "class" or default
        rename = ""
        if declaration:
            class_name = e.text(name) if name is not None else "__celld_default"
            shown = e.text(name) if name is not None else ""
            rename = "" if name is not None else "default"
        else:
            if self.legacy and decorators:
                e.fail(decorators[0], "experimentalDecorators do not apply to class expressions")
            class_name = ""
            shown = rename = self.expression_name(klass)
        record = self.record
        binding = ""  # the outer binding a static block sets first thing, when there is one
        start = statement.start_byte if statement is not None else klass.start_byte
        if decorators:
            start = min(start, decorators[0].start_byte)
        mode = "1" if self.legacy else "0"
        head = f"{record} = __celld_dec({mode}, {json.dumps(shown)}, ["
        params = f"[{', '.join(constructor_params)}], {json.dumps(rename)}"
        if declaration:
            e.insert(start, head)
            self.thunks(decorators)
            keywords = ""
            if statement is not None:
                for token in statement.children:
                    if token.type in ("export", "default"):
                        e.blank(token)
                        keywords += token.type + " "
            if default or not self.legacy:
                # the class keeps its name: inside it, that name is the undecorated class
                # (as in esbuild's output for standard decorators)
                e.insert(keyword.start_byte, f"], {params}); {keywords}")
                if name is None:
                    e.insert(keyword.end_byte, f" {class_name}")
            else:
                # experimentalDecorators: `let A; A = class { static { A = this } ... }`, so
                # code in the class sees the decorated class once decorators ran, as in
                # esbuild's output (a `let` assigned the class, then the decorators' result)
                e.insert(
                    keyword.start_byte, f"], {params}); {keywords}let {class_name}; {class_name} = "
                )
                assert name is not None
                e.blank(name)
                binding = class_name
            e.insert(klass.end_byte, f"; {class_name} = {record}.run({class_name});")
        else:
            e.insert(start, f"({head}")
            self.thunks(decorators)
            e.insert(keyword.start_byte, f"], {params}), {record}.run(")
            e.insert(klass.end_byte, "))")
        opening, closing = body.children[0], body.children[-1]
        if not self.legacy:
            e.insert(
                opening.end_byte,
                f" static {{ {record}.s(this); }} #__celld_i = {record}.ii(this);",
            )
            e.insert(closing.start_byte, f"; static {{ {record}.e(this); }} ")
        elif binding:
            e.insert(opening.end_byte, f" static {{ {binding} = this; }}")
        for index, (member, member_decorators) in enumerate(members):
            self.member(index, member, member_decorators)

    def expression_name(self, klass: Node) -> str:
        parent = klass.parent
        if parent is not None and parent.type == "variable_declarator":
            name = parent.child_by_field_name("name")
            if name is not None and name.type == "identifier":
                return self.e.text(name)
        return ""

    def members(self, body: Node) -> list[tuple[Node, list[Node]]]:
        """Each member with decorators (or, with experimentalDecorators, decorated
        parameters), with its decorators in source order."""
        out = []
        pending: list[Node] = []
        for child in body.named_children:
            if child.type == "decorator":
                pending.append(child)
                continue
            if child.type == "comment":
                continue
            own = [c for c in child.children if c.type == "decorator"]
            decorators, pending = pending + own, []
            params = self.decorated_params(child)
            if params and not self.legacy:
                self.e.fail(
                    params[0][1],
                    "Parameter decorators only work when experimental decorators are enabled",
                )
            if decorators or params:
                out.append((child, decorators))
        return out

    def decorated_params(self, member: Node) -> list[tuple[int, Node]]:
        params = member.child_by_field_name("parameters")
        if member.type != "method_definition" or params is None:
            return []
        out = []
        for index, param in enumerate(p for p in params.named_children if p.type != "comment"):
            out += [(index, d) for d in param.children if d.type == "decorator"]
        return out

    def parameters(self, member: Node) -> list[str]:
        """`[index, () => (expr)]` for each parameter decorator (blanked where it was)."""
        if not self.legacy:
            return []  # (refused in `members`)
        out = []
        for index, decorator in self.decorated_params(member):
            text = self.e.text(decorator)
            if "\n" in text:
                self.e.fail(
                    decorator,
                    "celld keeps every line in place and cannot move a parameter decorator "
                    "that spans lines; write it on one line",
                )
            out.append(f"[{index}, () => ({text[1:].strip()})]")
            self.e.blank(decorator)
        return out

    def thunks(self, decorators: list[Node]) -> None:
        for decorator in decorators:
            at = decorator.children[0]  # `@`
            self.e.replace(at, "() => (")
            self.e.insert(decorator.end_byte, "), ")

    def member(self, index: int, member: Node, decorators: list[Node]) -> None:
        e = self.e
        # (the JavaScript grammar calls a field's key `property`)
        name = member.child_by_field_name("name") or member.child_by_field_name("property")
        if name is None:
            e.fail(member, "this decorated class member is not supported by celld")
            return
        text = e.text(name)
        if name.type == "private_property_identifier" or text.startswith("#"):
            e.fail(
                decorators[0] if decorators else member,
                "decorators on private members (or `accessor` fields) are not supported by celld",
            )
        tokens = [c for c in member.children if c.end_byte <= name.start_byte]
        modifiers = [c for c in tokens if c.type in _MODIFIERS]
        if any(c.type == "accessor" for c in modifiers):
            e.fail(member, "decorators on `accessor` fields are not supported by celld")
        if member.type == "method_definition":
            kind = "method"
            if any(c.type == "get" for c in modifiers):
                kind = "getter"
            elif any(c.type == "set" for c in modifiers):
                kind = "setter"
        else:
            kind = "field"
        if text == "constructor" and kind == "method":
            if decorators:
                e.fail(decorators[0], "a constructor cannot be decorated")
            return  # its parameter decorators belong to the class
        static = any(c.type == "static" for c in modifiers)
        flags = _KIND[kind] | (8 if static else 0)
        params = self.parameters(member) if member.type == "method_definition" else []
        prefix = " ".join(e.text(c) for c in modifiers)
        start = decorators[0].start_byte if decorators else member.start_byte
        for modifier in modifiers:
            e.blank(modifier)
        e.insert(start, f"{prefix} [{self.record}.m({index}, {flags}, [")
        self.thunks(decorators)
        extra = f", [{', '.join(params)}]" if params else ""
        value = member.child_by_field_name("value")
        initial = ""
        if kind == "field" and not self.legacy and value is None:
            initial = f" = {self.record}.i({index}, this, void 0)"
        if name.type == "computed_property_name":
            e.replace(name.children[0], "], ")
            e.replace(name.children[-1], f"{extra})]{initial}")
        elif name.type in ("string", "number"):
            e.insert(name.start_byte, "], ")
            e.insert(name.end_byte, f"{extra})]{initial}")
        else:
            e.replace(name, f"], {json.dumps(text)}{extra})]{initial}")
        if kind == "field" and not self.legacy and value is not None:
            e.insert(value.start_byte, f"{self.record}.i({index}, this, ")
            e.insert(value.end_byte, ")")


# The run-time half, appended (one line, hoisted) to each module with decorators.
_HELPER = (
    "function __celld_dec(legacy, className, classThunks, ctorParams, rename) {"
    " const members = [], fieldInits = [], staticInits = [], instanceInits = [],"
    " classInits = []; let result;"
    ' const KINDS = [, "method", "getter", "setter", , "field"];'
    ' const metaKey = Symbol.metadata || Symbol.for("Symbol.metadata");'
    " const evaluate = (thunks, params) => { const list = thunks.map((t) => t());"
    " for (const [index, t] of params || []) { const d = t();"
    " list.push((target, key) => d(target, key, index)); } return list; };"
    " const named = (F) => { if (rename && F.name !== rename) {"
    ' const d = Object.getOwnPropertyDescriptor(F, "name");'
    ' if (d && typeof d.value === "string" && d.configurable)'
    ' Object.defineProperty(F, "name", { value: rename, configurable: true }); } };'
    ' const fn = (value, what) => { if (typeof value !== "function")'
    ' throw new TypeError(what + " must be a function"); return value; };'
    " return {"
    " m(index, flags, thunks, key, params) {"
    " members[index] = { flags, thunks, key, params }; return key; },"
    " i(index, receiver, value) { const inits = fieldInits[index];"
    " if (inits) for (const f of inits) value = f.call(receiver, value); return value; },"
    " ii(instance) { for (const f of instanceInits) f.call(instance); },"
    " e() { for (const f of classInits) f.call(result); },"
    " s(F) { named(F); const proto = F.prototype;"
    " const parent = Object.getPrototypeOf(F)[metaKey];"
    " const metadata = Object.create(parent === undefined ? null : parent);"
    " const classList = classThunks.map((t) => t());"
    " const lists = members.map((m) => m && m.thunks.map((t) => t()));"
    " const apply = (index) => { const m = members[index];"
    " const isStatic = (m.flags & 8) !== 0, kind = KINDS[m.flags & 7];"
    " const target = isStatic ? F : proto, key = m.key, decs = lists[index];"
    " const extra = isStatic ? staticInits : instanceInits;"
    ' const desc = kind === "field" ? undefined : Object.getOwnPropertyDescriptor(target, key);'
    ' let value = kind === "method" ? desc.value : kind === "getter" ? desc.get :'
    ' kind === "setter" ? desc.set : undefined;'
    " const has = (o) => key in o, get = (o) => o[key], set = (o, v) => { o[key] = v; };"
    ' const access = kind === "field" ? { has, get, set } : kind === "setter" ? { has, set }'
    " : { has, get };"
    " for (let i = decs.length - 1; i >= 0; i--) { let done = false;"
    " const ctx = { kind, name: key, static: isStatic, private: false, access, metadata,"
    " addInitializer(f) { if (done) throw new TypeError("
    '"addInitializer() cannot be called after decoration is finished");'
    ' extra.push(fn(f, "An initializer")); } };'
    " const r = decs[i](value, ctx); done = true;"
    ' if (r !== undefined) { fn(r, "A decorator\'s result");'
    ' if (kind === "field") (fieldInits[index] || (fieldInits[index] = [])).push(r);'
    " else value = r; } }"
    ' if (kind !== "field") { if (kind === "method") desc.value = value;'
    ' else if (kind === "getter") desc.get = value; else desc.set = value;'
    " Object.defineProperty(target, key, desc); } };"
    " const order = (wantStatic, wantField) => members.forEach((m, index) => {"
    " if (m && ((m.flags & 8) !== 0) === wantStatic && ((m.flags & 7) === 5) === wantField)"
    " apply(index); });"
    " order(true, false); order(false, false); order(true, true); order(false, true);"
    " let c = F;"
    " for (let i = classList.length - 1; i >= 0; i--) { let done = false;"
    ' const ctx = { kind: "class", name: className, metadata,'
    " addInitializer(f) { if (done) throw new TypeError("
    '"addInitializer() cannot be called after decoration is finished");'
    ' classInits.push(fn(f, "An initializer")); } };'
    " const r = classList[i](c, ctx); done = true;"
    ' if (r !== undefined) c = fn(r, "A decorator\'s result"); }'
    " Object.defineProperty(c, metaKey, { enumerable: true, configurable: true, writable: true,"
    " value: metadata });"
    " result = c; for (const f of staticInits) f.call(F); },"
    " run(F) { if (!legacy) return result; named(F);"
    " const ordered = members.filter(Boolean);"
    " for (const m of [...ordered.filter((m) => !(m.flags & 8)),"
    " ...ordered.filter((m) => m.flags & 8)]) {"
    " const target = m.flags & 8 ? F : F.prototype, list = evaluate(m.thunks, m.params);"
    " let r = (m.flags & 7) === 5 ? undefined : Object.getOwnPropertyDescriptor(target, m.key);"
    " for (let i = list.length - 1; i >= 0; i--) r = list[i](target, m.key, r) || r;"
    " if (r) Object.defineProperty(target, m.key, r); }"
    " const list = evaluate(classThunks, ctorParams); let c = F;"
    " for (let i = list.length - 1; i >= 0; i--) c = list[i](c) || c; return c; } }; }"
)
