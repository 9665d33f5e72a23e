"""Every notebook runs top to bottom on a fresh kernel (small sizes)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "pyspark-logsource-test"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec that runs this interpreter (the venv's), visible through JUPYTER_PATH only."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "pyspark-logsource (test)",
                "language": "python",
            }
        )
    )
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "LOGSOURCE_NOTEBOOK_SCALE", "PYSPARK_PYTHON")}
    os.environ["JUPYTER_PATH"] = str(root)
    os.environ["LOGSOURCE_NOTEBOOK_SCALE"] = os.environ.get("LOGSOURCE_NOTEBOOK_SCALE", "0.05")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_notebooks_exist():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "streaming", "exactly_once_etl"}


@pytest.mark.spark
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_env, tmp_path, monkeypatch):
    from support.spark_jvm import examples_conf_dir

    # conf/ plus the test drivers' JVM options (C1 only, the serial GC: tests/support/spark_jvm.py):
    # the kernel's session and the jobs it starts read it; the notebook's code is unchanged
    monkeypatch.setenv("LOGSOURCE_CONF_DIR", str(examples_conf_dir(tmp_path / "conf")))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=420,
        startup_timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    # the plots rendered
    if path.stem in ("quickstart", "streaming"):
        assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
