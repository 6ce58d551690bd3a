from rag_app.present.chunk_stats import histogram, render_text, save_png
from rag_app.config.settings import Settings


def test_histogram_counts_every_chunk_once(tmp_path):
    tokens = [1, 2, 3, 10, 10, 20]
    hist = histogram(tokens, bins=4)
    assert sum(c for _, _, c in hist) == len(tokens)
    assert hist[0] == (1, 5, 3) and hist[-1][2] == 1
    s = Settings(_env_file=None)
    text = render_text(hist, tokens, s)
    assert text.startswith("6 chunks") and "hard max 512" in text
    save_png(tokens, 4, tmp_path / "h.png", s)
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_chunks_are_counted_per_document_type():
    from rag_app.present.chunk_stats import by_doc_type, render_types

    def p(doc, kind, tokens, chunker="legal"):
        return {"doc_id": doc, "token_count": tokens, "chunker": chunker, "chunker_version": "2",
                **({"doc_type": kind} if kind else {})}
    rows = by_doc_type([p("a", "contract", 100, "contract"), p("a", "contract", 60, "contract"),
                        p("b", "statute", 200), p("c", None, 50)])  # c: written before types were recorded
    assert rows == [("contract", 1, 2, 80, "contract@2"), ("statute", 1, 1, 200, "legal@2"),
                    ("unrecorded", 1, 1, 50, "legal@2")]
    assert render_types(rows).splitlines()[1].split() == ["contract", "1", "2", "80", "contract@2"]
