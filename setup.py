"""The compiled core (issue 25): Cython extensions beside the pure-Python ``format/`` modules.

Metadata lives in pyproject.toml; this file only declares the extensions. They
are optional: without a compiler (or Cython) the package installs anyway and
``format/_speedups.py`` uses the pure-Python path, with a warning here at build
time. ``LOGSOURCE_NO_EXTENSIONS=1`` at build time skips the build; at run time
it switches a built extension off.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

EXTENSIONS = [
    "pyspark_logsource.format._ckafka",
    "pyspark_logsource.format._crecords",
    "pyspark_logsource.format._cbody",
    "pyspark_logsource.client._caccum",
    "pyspark_logsource.protocol._cproduce",
    "pyspark_logsource.format._cvalidate",
    "pyspark_logsource.broker.log._cruns",
    "pyspark_logsource.broker.log._cseg",
    "pyspark_logsource.protocol._canswers",
    "pyspark_logsource.client._cio",
    "pyspark_logsource.protocol._cround",
    "pyspark_logsource.client._csingles",
    "pyspark_logsource.broker.log._cproducers",
]


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the pure-Python modules are the fallback."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler, no Python headers
            _warn(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:
            _warn(e, ext.name)


_warned: list = []


def _warn(error: Exception, name: str = "the compiled core") -> None:
    if _warned:  # one failure is enough to say (a failed compile also fails the copy that follows)
        return
    _warned.append(error)
    print(
        f"WARNING: could not build {name} ({error}); pyspark-logsource installs with its pure-Python "
        "path (slower; same results)",
        file=sys.stderr,
    )


def _source(name: str) -> Extension:
    return Extension(name, [name.replace(".", "/") + ".pyx"], extra_compile_args=["-O3"])


def _extensions() -> list:
    if os.environ.get("LOGSOURCE_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        _warn(ImportError("Cython is not installed"))
        return []
    exts = [_source(name) for name in EXTENSIONS]
    try:
        return cythonize(exts, compiler_directives={"language_level": "3"}, quiet=True)
    except Exception as e:
        _warn(e)
        return []


if __name__ == "__main__" or "setuptools.build_meta" in sys.modules:
    setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
