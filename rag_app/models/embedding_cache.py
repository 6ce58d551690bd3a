"""Persistent embedding cache keyed by (model, sha256(text)): re-ingesting or re-asking never
pays for the same vector twice. One SQLite file; a connection per thread. Best effort: when the file
cannot be read or written (disk full, read-only, I/O error) a lookup is a miss and a write is dropped,
with a warning; a query never fails for its cache."""
from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


class EmbeddingCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._ready = False
        self._ensure_table()

    def _ensure_table(self) -> bool:
        if not self._ready:
            try:
                with self._conn() as c:
                    c.execute("CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_hash TEXT NOT NULL, "
                              "vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))")
                self._ready = True
            except sqlite3.Error as e:
                log.warning("embedding cache %s unusable (%s); embedding without it", self.path, e)
        return self._ready

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            # a cache: losing the last writes to a power cut costs a re-embedding, never a wrong vector (WAL
            # keeps the file whole); the default fsync per commit was ~6 ms of every new question
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def get_many(self, model: str, texts: list[str]) -> dict[str, np.ndarray]:
        keys = {self._key(t): t for t in texts}
        out: dict[str, np.ndarray] = {}
        items = list(keys)
        if not self._ensure_table():
            return out
        try:
            for i in range(0, len(items), 500):
                batch = items[i:i + 500]
                rows = self._conn().execute(
                    f"SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({','.join('?' * len(batch))})",
                    [model, *batch]).fetchall()
                for h, blob in rows:
                    out[keys[h]] = np.frombuffer(blob, dtype=np.float32)
        except sqlite3.Error as e:
            log.warning("embedding cache %s unreadable (%s); treating as misses", self.path, e)
        return out

    def put_many(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        if not self._ensure_table():
            return
        try:
            with self._conn() as c:
                c.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                              [(model, self._key(t), np.asarray(v, dtype=np.float32).tobytes())
                               for t, v in vectors.items()])
        except sqlite3.Error as e:
            log.warning("embedding cache %s not written (%s); %d vectors not kept", self.path, e, len(vectors))
