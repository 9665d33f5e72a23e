"""client/malloc_tuning: readers keep fetch-sized blocks in the process (glibc mallopt), once, opt-out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyspark_logsource.client import malloc_tuning

_GLIBC = sys.platform == "linux" and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")

_CHILD = "from pyspark_logsource.client.malloc_tuning import tune_for_fetches as t; print(t(), t())"


def _child(**env: str) -> str:
    e = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", _CHILD], env=e, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.skipif(not _GLIBC, reason="mallopt thresholds are glibc's")
def test_set_once_on_glibc():
    assert _child(LOGSOURCE_NO_MALLOPT="").split() == ["True", "True"]


def test_switched_off_by_the_environment():
    assert _child(LOGSOURCE_NO_MALLOPT="1").split() == ["False", "False"]


def test_thresholds_are_within_glibcs_bounds():
    # glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit): mallopt would return 0
    assert malloc_tuning.MMAP_THRESHOLD <= 32 << 20
    assert malloc_tuning.TRIM_THRESHOLD >= malloc_tuning.MMAP_THRESHOLD
