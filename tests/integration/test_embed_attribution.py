"""Each query books its own embedding tokens, however many run at once (no shared `last` state)."""
from __future__ import annotations

import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor

from rag_app.app import RagApp
from rag_app.core.usage import EmbedUsage
from tests.conftest import LAWS, make_settings


def test_concurrent_asks_of_different_lengths_book_their_own_embedding_tokens(tmp_path, tiny_models):
    settings = make_settings(tmp_path, embed_model=str(tiny_models["embedder-a"]), retriever="hybrid")
    questions = [f"劳动合同{'的期限' * n}有哪些？" for n in range(1, 41)]  # 40 distinct token counts
    old = sys.getswitchinterval()
    with RagApp(settings) as app:
        app.ingest([LAWS / "行政法规/仲裁委员会仲裁收费办法(1995-07-28).md"])
        emb = app.embeddings()
        expected = {q: emb.count_tokens([q]) for q in questions}
        assert len(set(expected.values())) == len(questions)
        sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up, if any
        try:
            with ThreadPoolExecutor(max_workers=16) as pool:
                answers = list(pool.map(app.ask, questions))
        finally:
            sys.setswitchinterval(old)
        assert app.writer.flush(30)
    conn = sqlite3.connect(settings.ledger_path)
    booked = dict(conn.execute("SELECT q.question, s.input_tokens FROM stage_calls s JOIN queries q USING (query_id) "
                               "WHERE s.stage = 'embed_query' AND q.kind = 'query'").fetchall())
    misses = conn.execute("SELECT SUM(cache_misses), SUM(cache_hits) FROM stage_calls WHERE stage = 'embed_query'").fetchone()
    conn.close()
    assert len(answers) == 40 and booked == expected
    assert misses == (40, 0)
    # The old race (counters left on the shared embedder, read back by the stage) has a window of a few
    # bytecodes, too narrow to trigger on demand; so also check that no per-call state is kept on it.
    assert not any(isinstance(v, EmbedUsage) for v in vars(emb).values())
