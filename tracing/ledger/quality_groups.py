"""Answer quality and users' feedback per report group: `rag report --by` rows, the quality-over-time series
the dashboard charts beside the cost, an experiment arm's quality, and each listed query's own.

Since m022 each answer's quality is in its totals and the rollups (schema.QUALITY_INT_SUMS/_FLOAT_SUMS), so
a group's quality is a sum of rollup rows like its cost (`rollup_quality`, `moments_of`); only the model dim,
which books an answer to the model that generated it, still reads the answers' rows (`grouped`).

Quality belongs to a query, not to a stage: each query's signals (source `local`) and feedback are
booked to its user, API key, variant, day, or the model that generated its answer (`generate_model` on
its totals; an answer with no generation call, extractive or from the answer cache, has none). One
grouped read per table (query_quality, query_feedback) joined to query_totals by primary key, never
one read per group.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, case, func, literal_column, select
from sqlalchemy.sql import ColumnElement

from rag_app.core import usd_json
from tracing.ledger.rollups import number
from tracing.ledger.schema import (
    GROUNDED_SQL,
    QUALITY_FILTERS,
    ROLLUP_QUALITY_SUMS,
    query_feedback,
    query_quality,
    query_totals,
    report_rollup,
)

# a metric the verdict reads -> its (n, sum, sum of squares) in the rollups; a rate's events are its own squares
ROLLUP_MOMENTS = {"groundedness": ("grounded_n", "grounded_sum", "grounded_sq"),
                  "invalid_citation_rate": ("cites_n", "cites_bad", "cites_bad"),
                  "refusal_rate": ("refusal_n", "refusal_yes", "refusal_yes"),
                  "judge_score": ("judge_n", "judge_sum", "judge_sq"),
                  "judge_faithfulness": ("faith_n", "faith_sum", "faith_sq"),
                  "feedback_score": ("feedback_n", "feedback_sum", "feedback_sq")}


def quality_sums(r=report_rollup) -> list:
    """SUM of each quality column of the rollups (`r`), labelled by its name."""
    return [func.sum(r.c[c]).label(c) for c in ROLLUP_QUALITY_SUMS]


def moments_of(sums) -> dict[str, tuple[int, float, float]]:
    """{metric: (n, sum, sum of squares)} of the metrics with data in a row of quality sums."""
    out = {}
    for m, (n, s1, s2) in ROLLUP_MOMENTS.items():
        k = int(number(sums[n]) or 0)
        if k:
            out[m] = (k, float(number(sums[s1])), float(number(sums[s2])))
    return out


def fields_of(sums) -> dict:
    """A group's quality fields (QUALITY_FIELDS) from its quality sums: answers scored, mean groundedness,
    share with an invalid citation, share that refused (of those scored since refusals are kept), feedback
    up (right), down (wrong) and in all; nothing scored: null."""
    g, c = int(number(sums["grounded_n"]) or 0), int(number(sums["cites_n"]) or 0)
    r = int(number(sums["refusal_n"]) or 0)
    return {"scored": c, "groundedness": round(float(number(sums["grounded_sum"])) / g, 4) if g else None,
            "invalid_citation_rate": round(int(number(sums["cites_bad"])) / c, 4) if c else None,
            "refusal_rate": round(int(number(sums["refusal_yes"])) / r, 4) if r else None,
            "feedback_up": int(number(sums["feedback_up"]) or 0), "feedback_down": int(number(sums["feedback_down"]) or 0),
            "feedback_count": int(number(sums["feedback_n"]) or 0)}


QUALITY_FIELDS = ("scored", "groundedness", "invalid_citation_rate", "refusal_rate", "feedback_up", "feedback_down",
                  "feedback_count")
_NONE = dict.fromkeys(QUALITY_FIELDS)  # nothing known (a ledger before quality was kept): null, never 0


def _key(dim: str) -> ColumnElement | None:
    """The model dim's key: the model that generated the answer (none: extractive, or from the cache)."""
    return query_totals.c.generate_model if dim == "model" else None


def grouped(db: Connection, keys: list[ColumnElement], where: list[ColumnElement]) -> dict[tuple, dict]:
    """{key tuple: quality fields} of the queries (query_totals rows `where` selects) per `keys`: answers
    scored, mean groundedness (over those with a claim), share with an invalid citation, share that
    refused (of those scored since refusals are kept; null before), feedback up (right), down (wrong) and
    count (every word, unsure too). A group nobody scored or rated is absent."""
    t, q, f = query_totals, query_quality, query_feedback
    scope = [t.c.kind == "query", *where]
    out: dict[tuple, dict] = {}
    signals = (select(*keys, q.c.metric, func.count(q.c.value), func.sum(q.c.value),
                      func.sum(case((q.c.value > 0, 1), else_=0)))
               .select_from(q.join(t, t.c.query_id == q.c.query_id))
               .where(q.c.source == "local", q.c.metric.in_(("groundedness", "invalid_citations", "refusal")),
                      q.c.value.is_not(None), *scope)
               .group_by(*keys, q.c.metric))
    n = len(keys)
    for row in db.execute(signals):
        k, (metric, count, total, bad) = tuple(row[:n]), row[n:]
        g = out.setdefault(k, {"scored": 0, "groundedness": None, "invalid_citation_rate": None,
                               "refusal_rate": None, "feedback_up": 0, "feedback_down": 0, "feedback_count": 0})
        count = int(number(count))
        if metric == "groundedness" and count:
            g["groundedness"] = round(float(number(total)) / count, 4)
        elif metric == "refusal" and count:
            g["refusal_rate"] = round(int(number(bad)) / count, 4)
        elif metric == "invalid_citations":
            g["scored"] = count
            g["invalid_citation_rate"] = round(int(number(bad)) / count, 4) if count else None
    said = (select(*keys, func.sum(case((f.c.score == 1, 1), else_=0)), func.sum(case((f.c.score == -1, 1), else_=0)),
                   func.count())
            .select_from(f.join(t, t.c.query_id == f.c.query_id)).where(*scope).group_by(*keys))
    for row in db.execute(said):
        k, (up, down, count) = tuple(row[:n]), row[n:]
        g = out.setdefault(k, {"scored": 0, "groundedness": None, "invalid_citation_rate": None, "refusal_rate": None})
        g.update(feedback_up=int(number(up)), feedback_down=int(number(down)), feedback_count=int(number(count)))
    return out


# the rollup rows that hold a query-level dim's groups: (dim, the column naming the group)
_ROLLUP_OF = {"user": ("user_total", "value"), "key": ("key", "value"), "variant": ("all", "variant"),
              "day": ("all", "day")}


def by_quality(db: Connection, dim: str, variant: str | None = None) -> dict[Any, dict] | None:
    """{group value (None for none, as `rag report --by` names it): quality fields} for a query-level
    dim (from the rollups) or `model` (the answers' rows); None for `stage` (no answer of its own)."""
    if dim in _ROLLUP_OF:
        r = report_rollup
        rdim, col = _ROLLUP_OF[dim]
        rows = db.execute(select(r.c[col], *quality_sums()).where(r.c.dim == rdim, *([r.c.variant == variant] if variant
                                                                                     else [])).group_by(r.c[col]))
        return {(row[0] or None): fields_of(row._mapping) for row in rows
                if any(number(row._mapping[n]) for n in ("cites_n", "grounded_n", "refusal_n", "feedback_n"))}
    key = _key(dim)
    if key is None:
        return None
    where = [] if not variant else [query_totals.c.variant == variant]
    return {(k[0] or None): v for k, v in grouped(db, [key], where).items()}


def blank(known: bool) -> dict:
    """A group with no scored answer and no feedback: counts 0 when quality is kept, else null."""
    return ({"scored": 0, "groundedness": None, "invalid_citation_rate": None, "refusal_rate": None,
             "feedback_up": 0, "feedback_down": 0, "feedback_count": 0} if known else dict(_NONE))


def over_time(db: Connection, since: str, until: str, variant: str | None = None) -> list[dict]:
    """Per day (UTC, `since` .. `until` inclusive, YYYY-MM-DD) and variant: queries, cost per query (the
    mean over priced queries; null when none is priced) and the quality fields, oldest day first, all from
    the day rollups."""
    r = report_rollup
    scope = [r.c.dim == "all", r.c.day >= since, r.c.day <= until, *([r.c.variant == variant] if variant else [])]
    rows = []
    for row in db.execute(select(r.c.day, r.c.variant, func.sum(r.c.queries).label("queries"),
                                 func.sum(r.c.priced_queries).label("priced"), func.sum(r.c.cost_nano_usd).label("nano"),
                                 func.sum(r.c.unpriced_rows).label("unpriced"), *quality_sums())
                          .where(*scope).group_by(r.c.day, r.c.variant)).mappings():
        queries, priced = int(number(row["queries"])), int(number(row["priced"]))
        if not queries:
            continue
        rows.append({"day": row["day"], "variant": row["variant"] or None, "queries": queries, "priced_queries": priced,
                     "cost_per_query_usd": usd_json(round(int(number(row["nano"])) / priced)) if priced else None,
                     "cost_is_lower_bound": int(number(row["unpriced"])) > 0, **fields_of(row)})
    rows.sort(key=lambda x: (x["day"], x["variant"] or ""))
    return rows


# -- one query at a time: the query list and its exports ------------------------------------------------
# Each listed query's own quality (rag_app/quality/signals.py; a judge's grades; users' feedback). A signal not
# recorded for an answer (not scored, not judged, a ledger before refusals were flagged) is null, never 0.
QUERY_QUALITY_FIELDS = ("groundedness", "refusal", "invalid_citations", "feedback_up", "feedback_down",
                        "judge_score", "judge_faithfulness")
_PER_QUERY = {("local", "groundedness"): "groundedness", ("local", "refusal"): "refusal",
              ("local", "invalid_citations"): "invalid_citations", ("judge", "judge_score"): "judge_score",
              ("judge", "faithfulness"): "judge_faithfulness"}


def per_query(db: Connection, ids: list[str]) -> dict[str, dict]:
    """{query_id: QUERY_QUALITY_FIELDS} of these queries (a page of a list: two reads by primary key)."""
    q, f = query_quality, query_feedback
    out: dict[str, dict[str, Any]] = {i: {"groundedness": None, "refusal": None, "invalid_citations": None,
                                          "feedback_up": 0, "feedback_down": 0, "judge_score": None,
                                          "judge_faithfulness": None} for i in ids}
    if not ids:
        return out
    for qid, source, metric, value in db.execute(
            select(q.c.query_id, q.c.source, q.c.metric, q.c.value)
            .where(q.c.query_id.in_(ids), q.c.metric.in_({m for _, m in _PER_QUERY}))):
        name = _PER_QUERY.get((source, metric))
        if name is None or value is None:
            continue
        out[qid][name] = (bool(value) if name == "refusal" else int(value) if name == "invalid_citations"
                          else round(float(value), 4))
    for qid, up, down in db.execute(
            select(f.c.query_id, func.sum(case((f.c.score == 1, 1), else_=0)), func.sum(case((f.c.score == -1, 1), else_=0)))
            .where(f.c.query_id.in_(ids)).group_by(f.c.query_id)):
        out[qid].update(feedback_up=int(number(up)), feedback_down=int(number(down)))
    return out


def query_filters(*, marked_wrong: bool = False, unsupported: bool = False, refusal: bool = False,
                  invalid_citations: bool = False, grounded_below: float | None = None) -> list[ColumnElement]:
    """Conditions on query_totals for the list's quality filters, each read from the query's own quality
    sums through a partial index (schema.QUALITY_FILTERS, m022): answers a user marked wrong; with a claim
    the passages do not support (its claims row counts one; scored before claims were kept: groundedness
    below 1); refusals; citing what was not sent; grounded below a threshold (strictly). Several: all."""
    asked = {"marked_wrong": marked_wrong, "unsupported": unsupported, "refusal": refusal,
             "invalid_citations": invalid_citations}
    # as literal SQL: the very text of each partial index's WHERE, which is what lets the engine use it
    out: list[ColumnElement] = [literal_column(QUALITY_FILTERS[name]) for name, on in asked.items() if on]
    if grounded_below is not None:
        out += [literal_column(GROUNDED_SQL), query_totals.c.grounded_sum < grounded_below]
    return out


def unknown_query() -> dict:
    """A query's quality fields on a ledger that predates quality and feedback: all null."""
    return dict.fromkeys(QUERY_QUALITY_FIELDS)
