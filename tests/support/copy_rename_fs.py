"""Test double: Hadoop's FileSystem with rename implemented as copy-then-delete, as on object stores.

Run as a script it is the ETL job with this filesystem serving file:// URIs:

    python tests/support/copy_rename_fs.py --output file:///tmp/out ...same options as logsource etl...

``rename`` copies every byte (Hadoop's ``FileUtil.copy``, a stream: a kill mid-copy leaves a short
file), pauses at ``rename_copied`` when LOGSOURCE_FAULT names it (so a kill -9 lands between
the copy and the delete), then deletes the source. ``atomic_rename`` is False, so the job's
``--commit-mode auto`` picks the direct protocol; ``--commit-mode rename`` forces renames.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark_logsource.faults import fault_point
from pyspark_logsource.offsets import register_filesystem
from pyspark_logsource.offsets.hadoop import HadoopFileSystem


class CopyRenameFileSystem(HadoopFileSystem):
    """rename = copy, then delete: not atomic, and the bytes are moved twice."""

    def __init__(self, uri: str, spark: Any = None) -> None:
        super().__init__(uri, spark)
        self.atomic_rename = False
        self.copies = 0

    def rename(self, src: str, dst: str) -> None:
        if not self.exists(src):
            raise FileNotFoundError(2, "no such file", src)
        if self.exists(dst):
            raise FileExistsError(17, "file exists", dst)
        util = self._jvm.org.apache.hadoop.fs.FileUtil
        ok = self._call(
            util.copy, src, self._fs, self._path(src), self._fs, self._path(dst), False, self._conf
        )
        if not ok:
            raise OSError(f"copy {src} -> {dst} failed")
        self.copies += 1
        fault_point("rename_copied")
        self.delete(src, recursive=True)


def install() -> None:
    """Serve file:// URIs with the double in this process."""
    register_filesystem("file", lambda uri: CopyRenameFileSystem(uri))


if __name__ == "__main__":
    install()
    from pyspark_logsource.etl.main import main

    sys.exit(main(sys.argv[1:]))
