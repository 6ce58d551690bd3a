from rag_app.chunk_stats import histogram, render_text, save_png
from rag_app.config import Settings


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
