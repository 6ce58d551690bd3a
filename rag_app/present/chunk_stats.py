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


def by_doc_type(payloads: list[dict]) -> list[tuple[str, int, int, float, str]]:
    """(doc type, documents, chunks, mean tokens, chunkers) per type, most chunks first. Chunks written
    before types were recorded show as `unrecorded` (re-ingest to classify them)."""
    groups: dict[str, list[dict]] = {}
    for p in payloads:
        groups.setdefault(p.get("doc_type") or "unrecorded", []).append(p)
    rows = []
    for kind, ps in groups.items():
        chunkers = sorted({f"{p['chunker']}@{p['chunker_version']}" for p in ps})
        rows.append((kind, len({p["doc_id"] for p in ps}), len(ps), statistics.mean(p["token_count"] for p in ps),
                     ", ".join(chunkers)))
    return sorted(rows, key=lambda r: (-r[2], r[0]))


def render_types(rows: list[tuple[str, int, int, float, str]]) -> str:
    lines = [f"{'doc type':<11} {'docs':>5} {'chunks':>7} {'mean tok':>8}  chunker"]
    lines += [f"{kind:<11} {docs:>5} {chunks:>7} {mean:>8.0f}  {chunkers}" for kind, docs, chunks, mean, chunkers in rows]
    return "\n".join(lines)


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
