"""A ledger file a test fills with plain SQL, as rows written around the writer would be."""
from __future__ import annotations

import sqlite3

from tracing.ledger import Ledger


class SqlLedger(Ledger):
    """A migrated SQLite ledger and a plain sqlite3 connection to it: `execute()` writes rows around the
    writer (the triggers mark their queries dirty), `commit()` commits and folds them into the totals as a
    writer's next step would. Everything else is the real repository."""

    def __init__(self, path):
        opened = Ledger.open(path)
        super().__init__(opened.engine, opened.target)
        self.raw = sqlite3.connect(path)
        self.raw.row_factory = sqlite3.Row

    def execute(self, *args):
        return self.raw.execute(*args)

    def commit(self) -> None:
        self.raw.commit()
        self.fold_backlog()

    def close(self) -> None:
        self.raw.close()
        super().close()


def select_rows(where, text: str, **params) -> list[tuple]:
    """A test's own read of the tables of any ledger (SQLite path or URL, PostgreSQL URL)."""
    import sqlalchemy as sa

    with Ledger.open(where) as L, L.engine.connect() as db:
        return [tuple(r) for r in db.execute(sa.text(text), params)]
