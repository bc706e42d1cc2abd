"""The wheel ships the JavaScript runtime (js/ becomes celld/_js)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from celld.isolate.runtime import CLOUDFLARE_FILES, HOST_FILES, WEB_FILES

REPO = Path(__file__).resolve().parent.parent


def test_wheel_contains_every_runtime_file(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    [wheel] = tmp_path.glob("celld-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in HOST_FILES + WEB_FILES + CLOUDFLARE_FILES:
        assert f"celld/_js/{name}" in names
    assert "celld/cli/main.py" in names
