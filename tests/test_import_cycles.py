"""scripts/import_cycles.py: the circles it finds (lazy, TYPE_CHECKING, relative and string imports
included) on a small package written here, and the package's own circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_cycles.py"

_FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from .b import thing\n",  # a -> b (top, relative)
    "pkg/b.py": "def f():\n    from . import a\n    return a\n",  # b -> a (lazy, `from . import sub`)
    "pkg/sub/__init__.py": "from .c import C\n",
    "pkg/sub/c.py": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..d import D\n"  # c -> d (type only, two levels up)
    ),
    "pkg/d.py": "import pkg.sub.c as c\n",  # d -> sub.c (absolute)
    "pkg/e.py": (  # e -> f (a name for import_module)
        "import importlib\nMODS = {'x': 'pkg.f'}\ndef load(k):\n    return importlib.import_module(MODS[k])\n"
    ),
    "pkg/f.py": "from pkg import e\n",
    "pkg/g.py": "LOGGER = 'pkg.h'\n",  # a string in a module that imports nothing by name: no edge
    "pkg/h.py": "from . import g\n",
    "pkg/i.py": "from .a import x\nfrom .d import y\n",  # into circles, not part of one
}


def _run(root: Path, package: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), "--package", package, *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_finds_lazy_type_only_relative_and_string_circles(tmp_path):
    for name, text in _FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    proc = _run(tmp_path, "pkg")
    assert proc.returncode == 1, proc.stderr
    circles = [line for line in proc.stdout.splitlines() if line.startswith("circle of")]
    assert circles == [
        "circle of 2: pkg.a, pkg.b",
        "circle of 2: pkg.d, pkg.sub.c",
        "circle of 2: pkg.e, pkg.f",
    ]
    assert "    pkg.b -> pkg.a (line 2, lazy)" in proc.stdout
    assert "    pkg.sub.c -> pkg.d (line 3, type)" in proc.stdout
    assert "    pkg.e -> pkg.f (line 2, string)" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "3 import circle(s) in pkg"


def test_no_circle_gives_exit_code_0(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .a import x\n")
    (tmp_path / "pkg" / "a.py").write_text("import os\n")
    proc = _run(tmp_path, "pkg")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 import circle(s) in pkg"]


def test_spark_datasource_and_etl_are_free_of_circles():
    # Issue 20 item 6 closed datasource <-> spark/sink and etl/directory <-> etl/verify; the
    # broker's and client's circles are other items' (and offsets' plug-in registry stays).
    proc = _run(ROOT, "pyspark_logsource")
    assert proc.returncode in (0, 1), proc.stderr
    circles = [line for line in proc.stdout.splitlines() if line.startswith("circle of")]
    for line in circles:
        members = line.split(": ", 1)[1].split(", ")
        assert not any(
            m == "pyspark_logsource.datasource"
            or m.startswith(("pyspark_logsource.spark.", "pyspark_logsource.etl."))
            for m in members
        ), line


def test_allow_accepts_exactly_the_named_circle(tmp_path):
    for name, text in _FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    everything = ["--allow", "pkg.b,pkg.a", "--allow", "pkg.d,pkg.sub.c", "--allow", "pkg.e,pkg.f"]
    assert _run(tmp_path, "pkg", *everything).returncode == 0
    two = _run(tmp_path, "pkg", "--allow", "pkg.a,pkg.b", "--allow", "pkg.e,pkg.f")
    assert two.returncode == 1 and "1 of them not allowed" in two.stdout
    # a part of a circle is not the circle: allowing it accepts nothing
    (tmp_path / "pkg" / "a.py").write_text("from .b import thing\nfrom .e import load\n")
    (tmp_path / "pkg" / "f.py").write_text("from pkg import e\nfrom pkg import b\n")
    assert _run(tmp_path, "pkg", *everything).returncode == 1


PLUGIN_REGISTRY = "pyspark_logsource.offsets.filesystem,pyspark_logsource.offsets.hadoop"


def test_the_package_has_one_circle_the_filesystem_plugin_registry():
    # Issue 20: every other circle (lazy and type-only imports included) is gone; make lint runs this.
    proc = _run(ROOT, "pyspark_logsource")
    circles = [line for line in proc.stdout.splitlines() if line.startswith("circle of")]
    assert circles == ["circle of 2: pyspark_logsource.offsets.filesystem, pyspark_logsource.offsets.hadoop"]
    assert _run(ROOT, "pyspark_logsource", "--allow", PLUGIN_REGISTRY).returncode == 0
