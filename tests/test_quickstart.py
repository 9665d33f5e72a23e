"""The README's quickstart, saved to a file and run the way people run scripts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _quickstart_code() -> str:
    text = README.read_text()
    section = text[text.index("## Quickstart") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _clean_env(tmp_path: Path) -> dict[str, str]:
    # what a fresh shell has: no PYSPARK_PYTHON, no virtualenv activated
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


@pytest.mark.spark
@pytest.mark.timeout(700)
def test_readme_quickstart_runs_as_a_script_with_a_clean_environment(tmp_path):
    """Run twice, as people do: the second run finds the topic and the data of the first."""
    code = _quickstart_code().replace("/tmp/logsource-data", str(tmp_path / "data"))
    script = tmp_path / "quickstart.py"
    script.write_text(code)
    for run in (1, 2):
        out = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=_clean_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=330,
        )
        assert out.returncode == 0, f"run {run}:\n{out.stderr[-4000:]}"
        assert out.stdout.count('{"page": "/"}') == run, out.stdout  # the rows Spark read back
        # quiet by default: what Spark prints before register(spark) runs (the JVM's start) is all there is
        assert "replaced a statically registered data source" not in out.stderr
        after_start = out.stderr.split("Setting default log level", 1)[-1]
        warned = [ln for ln in after_start.splitlines() if " WARN " in ln and "NativeCodeLoader" not in ln]
        assert not warned, out.stderr
        assert len(out.stderr.splitlines()) < 15, out.stderr


def test_the_import_points_spark_workers_at_this_interpreter_unless_chosen(tmp_path):
    probe = "import os, pyspark_logsource; print(os.environ['PYSPARK_PYTHON'])"
    env = _clean_env(tmp_path)
    got = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == sys.executable
    env["PYSPARK_PYTHON"] = "/opt/their/python"
    got = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "/opt/their/python"
