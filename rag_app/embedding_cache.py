"""Persistent embedding cache keyed by (model, sha256(text)): re-ingesting or re-asking never
pays for the same vector twice. One SQLite file; a connection per thread."""
from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np


class EmbeddingCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_hash TEXT NOT NULL, "
                      "vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def get_many(self, model: str, texts: list[str]) -> dict[str, np.ndarray]:
        keys = {self._key(t): t for t in texts}
        out: dict[str, np.ndarray] = {}
        items = list(keys)
        for i in range(0, len(items), 500):
            batch = items[i:i + 500]
            rows = self._conn().execute(
                f"SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({','.join('?' * len(batch))})",
                [model, *batch]).fetchall()
            for h, blob in rows:
                out[keys[h]] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        with self._conn() as c:
            c.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)",
                          [(model, self._key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in vectors.items()])
