"""CommonJS in a bundle: telling module formats apart and finding static `require()` calls.

npm packages still ship CommonJS (`module.exports`, `require`). A file is CommonJS when
its extension says so (`.cjs`, `.cts`), or when it has no `import`/`export` statements, its
package.json does not declare `"type": "module"`, and it mentions `require`, `module` or
`exports`; everything else is an ES module. This is the rule esbuild (and so wrangler)
applies, which is looser than Node's, so packages that mix the two forms load as they do
under `wrangler dev`.

A `require("x")` whose argument is a string literal is resolved ahead of time (like a
static import); a require of anything else fails when it runs, with a message saying so.
"""

from __future__ import annotations

from tree_sitter import Language, Node, Query, QueryCursor

ESM_SUFFIXES = (".mjs", ".mts")
CJS_SUFFIXES = (".cjs", ".cts")
_CJS_NAMES = frozenset({"require", "module", "exports"})


def module_format(language: Language, root: Node, suffix: str, package_type: str) -> str:
    """'esm' or 'cjs' for a parsed script (see the module docstring for the rule)."""
    if suffix in ESM_SUFFIXES:
        return "esm"
    if suffix in CJS_SUFFIXES:
        return "cjs"
    for node in root.named_children:
        if node.type in ("import_statement", "export_statement"):
            return "esm"
    if package_type == "module":
        return "esm"
    captures = QueryCursor(_query(language)).captures(root)
    for node in captures.get("id", []):
        if node.text is not None and node.text.decode("utf-8", "replace") in _CJS_NAMES:
            return "cjs"
    return "esm"


_QUERIES: dict[int, Query] = {}


def _query(language: Language) -> Query:
    key = id(language)
    if key not in _QUERIES:
        _QUERIES[key] = Query(
            language,
            '((identifier) @id (#any-of? @id "require" "module" "exports"))',
        )
    return _QUERIES[key]


_REQUIRE_QUERIES: dict[int, Query] = {}


def require_calls(language: Language, root: Node) -> list[tuple[Node, Node]]:
    """(call, string argument) of every `require("literal")` call in source order."""
    key = id(language)
    if key not in _REQUIRE_QUERIES:
        _REQUIRE_QUERIES[key] = Query(
            language,
            '(call_expression function: (identifier) @fn (#eq? @fn "require") '
            "arguments: (arguments . (string) @spec .)) @call",
        )
    matches = QueryCursor(_REQUIRE_QUERIES[key]).matches(root)
    out = []
    for _, capture in matches:
        call = capture["call"][0]
        spec = capture["spec"][0]
        out.append((call, spec))
    out.sort(key=lambda pair: pair[0].start_byte)
    return out
