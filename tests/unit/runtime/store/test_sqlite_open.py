"""Opening a SQLite store another connection is writing: the switch into WAL mode waits for
the writer instead of failing at once."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ankka.runtime.store.sqlite import connect


def test_an_opener_switching_a_file_into_wal_waits_for_a_writer_holding_its_lock(
    tmp_path: Path,
) -> None:
    # A connection that read the file (rollback mode) and then began writing holds its
    # reserved lock; an opener that has read too and asks for the exclusive lock the switch
    # into WAL needs is told "database is locked" by SQLite at once (its busy handler would
    # deadlock). The opener tries again and gets in once the writer commits.
    path = tmp_path / "store.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE kept (x INTEGER)")
    writer.execute("BEGIN")
    writer.execute("SELECT * FROM kept").fetchall()
    writer.execute("INSERT INTO kept VALUES (1)")
    committed = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    committed.start()
    try:
        db = connect(path, ())
    finally:
        committed.join()
        writer.close()
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT x FROM kept").fetchall() == [(1,)]
    finally:
        db.close()
