"""Where DuckDB spills: a private directory under the system's temporary directory.

A DuckDB connection that outgrows its ``memory_limit`` writes temporary files
(about 1.9 GB for 1M prompts). Left to itself DuckDB writes them into ``.tmp``
of the current directory; :func:`connect` points its ``temp_directory`` at a
fresh directory (mode 0700) under ``temp_dir`` (the operator's ``--temp-dir``)
or else the system temporary directory (``$TMPDIR``, else ``/tmp``:
:func:`tempfile.gettempdir`), and :func:`close` closes the connection and
removes that directory with whatever is left in it (a connection nobody closes:
when it is collected, or when the process exits; a killed process leaves it).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import duckdb

from tool_failure_guard.rollout.errors import InputError

#: The private spill directories' name prefix (:func:`close` removes only these).
PREFIX = "tool-failure-guard-duckdb."


def connect(*, temp_dir: Path | None = None, **config: Any) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection (``config`` its settings) spilling into a private dir."""
    try:
        private = Path(tempfile.mkdtemp(prefix=PREFIX, dir=temp_dir))
    except OSError as error:
        where = temp_dir if temp_dir is not None else tempfile.gettempdir()
        raise InputError(
            f"cannot create DuckDB's spill directory in {where}: "
            f"{error.strerror or type(error).__name__}"
        ) from None
    try:
        con = duckdb.connect(config={**config, "temp_directory": str(private)})
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    con.execute("SET enable_progress_bar = false")
    # A connection its owner never closes still leaves nothing: removed when it is
    # collected, or at the latest when the process exits.
    weakref.finalize(con, shutil.rmtree, private, True)
    return con


def directory(con: duckdb.DuckDBPyConnection) -> Path:
    """The directory ``con`` spills into."""
    row = con.execute("SELECT current_setting('temp_directory')").fetchone()
    return Path(str(row[0] if row else ""))


def close(con: duckdb.DuckDBPyConnection) -> None:
    """Close ``con`` and remove its private spill directory (one :func:`connect` made)."""
    try:
        spill: Path | None = directory(con)
    except duckdb.Error:  # already closed
        spill = None
    con.close()
    if spill is not None and spill.name.startswith(PREFIX):
        shutil.rmtree(spill, ignore_errors=True)
