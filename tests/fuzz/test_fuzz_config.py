"""Generated configs: the reader returns a project or raises ConfigError, nothing else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from celld.project import ConfigError, ProjectConfig, load_config, parse_var_option

KEYS = [
    "name", "main", "compatibility_date", "compatibility_flags", "vars", "workflows",
    "limits", "kv_namespaces", "env", "build", "triggers", "unknown_key", "$schema",
]  # fmt: skip
WORKFLOW_KEYS = ["name", "binding", "class_name", "script_name", "limits", "extra"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.just("src/index.js"),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)
workflow = st.dictionaries(st.sampled_from(WORKFLOW_KEYS), values, max_size=6)
config = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(values, st.lists(workflow, max_size=3)),
    max_size=len(KEYS),
)

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def load(name: str, text: str | bytes, dev_vars: str | None = None) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "src").mkdir()
        (root / "src" / "index.js").write_text("export default {};\n")
        path = root / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        if dev_vars is not None:
            (root / ".dev.vars").write_text(dev_vars, encoding="utf-8", errors="surrogatepass")
        try:
            return load_config(path)
        except ConfigError as error:
            assert str(error)  # a message naming what is wrong
            return error


@FUZZ
@given(config)
def test_generated_json_configs(data: dict[str, Any]) -> None:
    text = json.dumps(data, allow_nan=True)
    assert isinstance(load("wrangler.json", text), ProjectConfig | ConfigError)


@FUZZ
@given(config, st.sampled_from(["// c\n", "/* c */", ""]), st.booleans())
def test_generated_jsonc_configs(data: dict[str, Any], comment: str, trailing: bool) -> None:
    text = comment + json.dumps(data, allow_nan=True)
    if trailing and text.endswith("}") and len(text) > 2:
        text = text[:-1] + ",}"
    assert isinstance(load("wrangler.jsonc", text), ProjectConfig | ConfigError)


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text_as_toml_and_jsonc(text: str) -> None:
    for name in ("wrangler.toml", "wrangler.jsonc"):
        assert isinstance(load(name, text), ProjectConfig | ConfigError)


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data: bytes) -> None:
    assert isinstance(load("wrangler.toml", data), ProjectConfig | ConfigError)


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_dev_vars(text: str) -> None:
    result = load("wrangler.json", '{"main": "src/index.js"}', dev_vars=text)
    assert isinstance(result, ProjectConfig | ConfigError)


@FUZZ
@given(st.text(max_size=40))
def test_var_options(text: str) -> None:
    try:
        key, value = parse_var_option(text)
    except ValueError as error:
        assert "--var" in str(error)
    else:
        assert f"{key}:{value}" == text
