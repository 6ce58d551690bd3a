"""law: a law-level prior. Laws are scored by the summed scores of their best chunks; a chunk's score
gets its law's (normalised) score added, so chunks of the laws the question is about rise."""
from __future__ import annotations

from rag_app.query.levers._contract import Lever, Ordered, Ranking, SearchRequest


def law_prior(ordered: Ordered, titles: dict[str, str], weight: float, top: int) -> Ordered:
    """score' = score/max + weight * law score/max law score; law score = sum of its `top` best chunk scores."""
    if not ordered:
        return ordered
    best = max(s for _, s in ordered) or 1.0
    per_law: dict[str, list[float]] = {}
    for cid, s in ordered:
        per_law.setdefault(titles[cid], []).append(s / best)
    law = {t: sum(sorted(v, reverse=True)[:top]) for t, v in per_law.items()}
    lmax = max(law.values()) or 1.0
    rescored = [(cid, s / best + weight * law[titles[cid]] / lmax) for cid, s in ordered]
    return sorted(rescored, key=lambda kv: -kv[1])


class Law(Lever, name="law", stage="ranking", order=10):
    def rerank(self, req: SearchRequest, r: Ranking) -> Ranking:
        titles = {c: p["title"] for c, p in r.payloads.items()}
        return Ranking(law_prior(r.ordered, titles, req.params.law_weight, req.params.law_top_chunks), r.payloads)


LEVER = Law()
