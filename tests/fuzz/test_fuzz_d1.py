"""Generated D1 SQL reaches no file but the database's own (celld/bindings/sqlguard.py).

Every PRAGMA this SQLite knows (``PRAGMA pragma_list``), with and without arguments and as a
table-valued function; every kind of statement (ATTACH, DETACH, VACUUM, VACUUM INTO, REINDEX,
ANALYZE, virtual tables of every module, TEMP objects, triggers, views, recursive CTEs,
transactions, ALTER TABLE, schema writes); every SQL function SQLite has
(``PRAGMA function_list``) and the shell's file functions; all aimed at paths outside the
database (absolute, relative to the working folder, ``file:`` URIs, celld's workflow store).
Statements are combined at random and run from a real isolate through env.DB, as one prepared
text, a batch or exec().

After each example: no new file anywhere under the test's folder (the working folder, the
targets, the state folder) but the database's own, none in the system temp folder with this
run's mark, the store byte for byte as it was, and every refusal a D1 error.
CELLD_FUZZ_D1_EXAMPLES sets the number of examples (default 40: well under 30 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.bindings.harness import Harness

MARK = f"celldfuzz{uuid.uuid4().hex[:10]}"
EXAMPLES = int(os.environ.get("CELLD_FUZZ_D1_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_probe = sqlite3.connect(":memory:")
PRAGMAS = sorted(row[0] for row in _probe.execute("PRAGMA pragma_list"))
FUNCTIONS = sorted({row[0] for row in _probe.execute("PRAGMA function_list")})
MODULES = sorted(row[0] for row in _probe.execute("PRAGMA module_list"))
_probe.close()
assert "database_list" in PRAGMAS and "writable_schema" in PRAGMAS
FUNCTIONS += ["readfile", "writefile", "edit", "load_extension", "fts3_tokenizer"]
MODULES += ["sqlite_dbpage", "csv", "zipfile", "fsdir", "nosuchmodule"]


class Places:
    """Where the statements aim; every name carries MARK so a stray file is recognisable."""

    def __init__(self, root: Path, state: Path) -> None:
        self.root = root
        self.store = state / "celld.sqlite3"
        system_tmp = Path(tempfile.gettempdir())
        self.paths = [
            str(root / f"{MARK}-abs.db"),
            f"{MARK}-relative.db",
            f"../{MARK}-up.db",
            str(system_tmp / f"{MARK}-tmp.db"),
            f"file:{root / MARK}-uri.db?mode=rwc",
            f"file:{MARK}-rel-uri.db",
            f"file:{system_tmp / MARK}-tmp-uri.db?mode=rwc&cache=shared",
            f"file:{MARK}?mode=memory",
            str(self.store),
            f"file:{self.store}?mode=rw",
            str(state / "d1" / f"{MARK}-beside.db"),
            str(root / f"{MARK}-dir"),
            "",
            ":memory:",
        ]


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def statements(places: Places) -> st.SearchStrategy[str]:
    path = st.sampled_from(places.paths).map(quoted)
    name = st.sampled_from(["t", "x", "main", "temp", "_cf_KV", "sqlite_master", "v", "nope"])
    number = st.sampled_from(["0", "1", "-1", "2", "100", "0x10002", "4096"])
    word = st.sampled_from(["on", "off", "yes", "'no'", "full", "memory", "wal", "delete"])
    pragma_arg = st.one_of(number, word, name, path)
    pragma = st.sampled_from(PRAGMAS)
    schema = st.sampled_from(["", "main.", "temp.", "x."])
    pragmas = st.one_of(
        st.builds(lambda s, p: f"PRAGMA {s}{p}", schema, pragma),
        st.builds(lambda s, p, a: f"PRAGMA {s}{p} = {a}", schema, pragma, pragma_arg),
        st.builds(lambda s, p, a: f"PRAGMA {s}{p}({a})", schema, pragma, pragma_arg),
        st.builds(lambda p: f"SELECT * FROM pragma_{p}", pragma),
        st.builds(lambda p, a: f"SELECT * FROM pragma_{p}({a})", pragma, pragma_arg),
    )
    argument = st.one_of(path, number, name.map(quoted), st.sampled_from(["x'00'", "NULL", "t.a"]))
    functions = st.builds(
        lambda f, args: f"SELECT {f}({', '.join(args)}) FROM t",
        st.sampled_from(FUNCTIONS),
        st.lists(argument, max_size=3),
    )
    dml = st.sampled_from(
        [
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = a + 1",
            "DELETE FROM t WHERE a > 5",
            "INSERT INTO x.t VALUES (1)",
            "INSERT INTO _cf_KV VALUES ('k', 'v')",
            "UPDATE sqlite_master SET sql = 'x'",
            "SELECT writefile('w', 'x')",
        ]
    )
    kinds = st.one_of(
        st.builds(lambda p, n: f"ATTACH DATABASE {p} AS {n}", path, st.sampled_from(["x", "w"])),
        st.builds(
            lambda p: f"ATTACH {p} AS x; CREATE TABLE x.t (a); INSERT INTO x.t VALUES (1)", path
        ),
        st.builds(lambda n: f"DETACH DATABASE {n}", name),
        st.builds(
            lambda s, p: f"VACUUM {s}INTO {p}", st.sampled_from(["", "main ", "temp "]), path
        ),
        st.sampled_from(
            [
                "VACUUM",
                "VACUUM main",
                "VACUUM temp",
                "REINDEX",
                "REINDEX t",
                "ANALYZE",
                "ANALYZE t",
                "ANALYZE sqlite_master",
                "BEGIN",
                "BEGIN IMMEDIATE",
                "COMMIT",
                "ROLLBACK",
                "END",
                "SAVEPOINT s",
                "RELEASE s",
                "ROLLBACK TO s",
                "CREATE TABLE IF NOT EXISTS t (a)",
                "DROP TABLE IF EXISTS v",
                "ALTER TABLE t ADD COLUMN b",
                "ALTER TABLE t RENAME TO _cf_t",
                "ALTER TABLE t RENAME TO t2",
                "ALTER TABLE t2 RENAME TO t",
                "CREATE TEMP TABLE tt (a)",
                "CREATE TEMP VIEW tv AS SELECT 1",
                "CREATE TABLE IF NOT EXISTS _cf_KV (key, value)",
                "SELECT * FROM sqlite_temp_master",
                "SELECT * FROM temp.sqlite_master",
                "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
                "WHERE n < 50) SELECT count(*) FROM c",
            ]
        ),  # fmt: skip
        st.builds(
            lambda m, n: f"CREATE VIRTUAL TABLE IF NOT EXISTS vt_{n} USING {m}(a, b, c)",
            st.sampled_from(MODULES),
            st.integers(0, 3),
        ),
        st.builds(lambda m: f"SELECT * FROM {m}", st.sampled_from(MODULES)),
        st.builds(
            lambda temp, d: (
                f"CREATE {temp}TRIGGER IF NOT EXISTS tr AFTER INSERT ON t BEGIN {d}; END"
            ),
            st.sampled_from(["", "TEMP "]),
            dml,
        ),
        st.builds(
            lambda temp, s: f"CREATE {temp}VIEW IF NOT EXISTS v AS {s}",
            st.sampled_from(["", "TEMP "]),
            st.sampled_from(
                [
                    "SELECT * FROM t",
                    "SELECT * FROM pragma_database_list",
                    "SELECT * FROM _cf_KV",
                    "SELECT sqlite_version()",
                ]
            ),  # fmt: skip
        ),
        dml,
        pragmas,
        functions,
    )
    return kinds


def run_d1(js: Harness, mode: str, sqls: list[str]) -> list[str]:
    """The statements through env.DB; each answer "ok" or the error's message."""
    return js(f"""
        const mode = {json.dumps(mode)}, sqls = {json.dumps(sqls)};
        await env.DB.exec("CREATE TABLE IF NOT EXISTS t (a)");
        const out = [];
        const attempt = async (run) => {{
          try {{ await run(); out.push("ok"); }} catch (e) {{ out.push(String(e.message)); }}
        }};
        if (mode === "one") await attempt(() => env.DB.prepare(sqls.join(";\\n")).all());
        if (mode === "batch") await attempt(() => env.DB.batch(sqls.map((s) => env.DB.prepare(s))));
        if (mode === "exec") await attempt(() => env.DB.exec(sqls.join("\\n")));
        if (mode === "each") for (const s of sqls) await attempt(() => env.DB.prepare(s).raw());
        return out;
    """)


def snapshot(root: Path) -> dict[Path, bytes]:
    """Every file under `root` and its hash (the database's own files excepted: they change)."""
    out: dict[Path, bytes] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.name.startswith("db-id.sqlite3"):
            out[path] = hashlib.sha256(path.read_bytes()).digest()
        elif not path.is_file():
            out[path] = b"dir"
    return out


def marked_in_system_tmp() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if MARK in name}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Harness, Places]:
    """A harness whose state holds a workflow store with one finished instance, run from a
    fresh working folder inside the test's folder."""
    work = tmp_path / "cwd" / "inner"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    js = Harness(tmp_path / "state")
    places = Places(tmp_path, js.state)
    js.state.mkdir()
    store = sqlite3.connect(places.store)
    store.execute("CREATE TABLE instances (id TEXT PRIMARY KEY, output TEXT)")
    store.execute("""INSERT INTO instances VALUES ('one', '{"n": 1}')""")
    store.commit()
    store.close()
    run_d1(js, "each", ["SELECT 1"])  # the bindings' own files exist from here on
    return js, places


@FUZZ
@given(data=st.data())
def test_generated_d1_sql_reaches_no_other_file(
    world: tuple[Harness, Places], tmp_path: Path, data: st.DataObject
) -> None:
    js, places = world
    sqls = data.draw(st.lists(statements(places), min_size=1, max_size=6), label="sql")
    mode = data.draw(st.sampled_from(["one", "batch", "exec", "each"]), label="mode")
    before, tmp_before = snapshot(tmp_path), marked_in_system_tmp()
    answers = run_d1(js, mode, sqls)
    assert snapshot(tmp_path) == before, "a file outside the database changed or appeared"
    assert marked_in_system_tmp() == tmp_before == set()
    for answer in answers:
        assert answer == "ok" or answer.startswith(("D1_ERROR: ", "D1_EXEC_ERROR: ")), answer


def test_the_fuzzer_covers_every_pragma_and_the_attacks() -> None:
    """The pools hold what the module doc promises (a guard against a shrunken fuzzer)."""
    assert len(PRAGMAS) > 60 and {
        "database_list",
        "writable_schema",
        "temp_store_directory",
    } <= set(PRAGMAS)
    assert {"load_extension", "fts3_tokenizer", "readfile", "writefile"} <= set(FUNCTIONS)
    assert {"fts5", "fts3", "rtree", "dbstat"} <= set(MODULES)
