"""Loading many rows at once (benchmarks and fixtures), and what the ledger weighs. Not the writer's path:
rows loaded here skip the writer's quarantine and buffering; the triggers still mark their queries dirty,
and `Ledger.rebuild_totals()` (or any writer) folds them in."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from typing import Any

from sqlalchemy import Engine, func, insert, select, text

from tracing.ledger.schema import TABLES, metadata


def load(engine: Engine, table: str, rows: Sequence[dict]) -> int:
    """Insert `rows` (dicts with the same keys) in one transaction: COPY on PostgreSQL, executemany on SQLite."""
    if not rows:
        return 0
    t = TABLES[table]
    cols = list(rows[0])
    with engine.begin() as db:
        if db.dialect.name == "postgresql":
            raw: Any = db.connection.driver_connection  # psycopg's connection: COPY is its own API
            cur = raw.cursor()
            with cur.copy(f"COPY {t.name} ({', '.join(t.c[c].name for c in cols)}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row([r[c] for c in cols])
        else:
            db.execute(insert(t), list(rows))
    return len(rows)


def batches(engine: Engine, table: str, rows: Iterable[dict], size: int = 200) -> int:
    """The same rows as `size`-row transactions through executemany: the raw rate a writer is measured against."""
    t, done, chunk = TABLES[table], 0, []
    for r in rows:
        chunk.append(r)
        if len(chunk) == size:
            with engine.begin() as db:
                db.execute(insert(t), chunk)
            done, chunk = done + len(chunk), []
    if chunk:
        with engine.begin() as db:
            db.execute(insert(t), chunk)
        done += len(chunk)
    return done


def analyze(engine: Engine) -> None:
    """Planner statistics after a bulk load (PostgreSQL: what autovacuum would do; SQLite: ANALYZE)."""
    with engine.connect() as db:
        if db.dialect.name == "postgresql":
            raw: Any = db.connection.driver_connection  # VACUUM cannot run inside a transaction
            raw.autocommit = True
            db.exec_driver_sql("VACUUM ANALYZE")
            raw.autocommit = False
        else:
            db.exec_driver_sql("ANALYZE")
            db.commit()


def size_bytes(engine: Engine) -> dict[str, int]:
    """The ledger's bytes: the SQLite file (pages in use), or PostgreSQL's database and its tables with indexes."""
    with engine.connect() as db:
        if db.dialect.name == "postgresql":
            database = db.execute(select(func.pg_database_size(func.current_database()))).scalar()
            tables = sum(int(db.execute(select(func.pg_total_relation_size(text(f"'{t}'::regclass")))).scalar() or 0)
                         for t in metadata.tables)
            return {"database": int(database or 0), "tables": tables}
        pages = db.exec_driver_sql("PRAGMA page_count").scalar()
        size = db.exec_driver_sql("PRAGMA page_size").scalar()
        return {"database": int(pages or 0) * int(size or 0), "tables": int(pages or 0) * int(size or 0)}
