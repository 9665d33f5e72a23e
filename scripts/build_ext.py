"""Build the compiled core in place (``format/_ckafka``) with any setuptools, without installing.

``pip install -e .`` (``make install``) builds it too, but installs the package; a work tree run
with ``PYTHONPATH`` against a shared venv builds it here instead. ``python setup.py build_ext
--inplace`` does the same where the venv's setuptools reads this pyproject.toml (77 or newer).

    python scripts/build_ext.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    from Cython.Build import cythonize
    from setuptools import Distribution

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    from setup import EXTENSIONS, OptionalBuildExt, _source  # the one list of extensions

    exts = cythonize(
        [_source(n) for n in EXTENSIONS], compiler_directives={"language_level": "3"}, quiet=True
    )
    # a bare Distribution: setup() would read pyproject.toml, which needs setuptools >= 77
    dist = Distribution({"ext_modules": exts, "cmdclass": {"build_ext": OptionalBuildExt}})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = True
    cmd.ensure_finalized()
    cmd.run()
    built = [n for n in EXTENSIONS if list(ROOT.glob(n.replace(".", "/") + ".*.so"))]
    print(f"built in place: {', '.join(built) or 'nothing (see the warning above)'}")
    return 0 if len(built) == len(EXTENSIONS) else 1


if __name__ == "__main__":
    sys.exit(main())
