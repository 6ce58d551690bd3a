"""Chunk-length histogram: text for the terminal, PNG for reports."""
from __future__ import annotations

import statistics
from pathlib import Path


def histogram(tokens: list[int], bins: int) -> list[tuple[int, int, int]]:
    """[(lo, hi, count)] over equal-width bins covering min..max."""
    if not tokens:
        return []
    lo, hi = min(tokens), max(tokens)
    width = max(1, -(-(hi - lo + 1) // bins))
    counts = [0] * bins
    for t in tokens:
        counts[min((t - lo) // width, bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width - 1, c) for i, c in enumerate(counts) if lo + i * width <= hi]


def render_text(hist, tokens: list[int], settings, width: int = 50) -> str:
    if not tokens:
        return "no chunks"
    peak = max(c for _, _, c in hist)
    lines = [f"{len(tokens)} chunks; tokens mean {statistics.mean(tokens):.0f}, median {statistics.median(tokens):.0f}, "
             f"max {max(tokens)}; target {settings.chunk_target_min}-{settings.chunk_target_max}, "
             f"hard max {settings.chunk_hard_max}"]
    for lo, hi, c in hist:
        lines.append(f"{lo:>6}-{hi:<6} {c:>6} {'#' * round(width * c / peak)}")
    return "\n".join(lines)


def save_png(tokens: list[int], bins: int, path: Path, settings) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.hist(tokens, bins=bins, color="#4477aa")
    ax.axvspan(settings.chunk_target_min, settings.chunk_target_max, color="#ccbb44", alpha=0.3, label="target")
    ax.axvline(settings.chunk_hard_max, color="#ee6677", linestyle="--", label="hard max")
    ax.set_xlabel("chunk length (cl100k tokens)")
    ax.set_ylabel("chunks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
