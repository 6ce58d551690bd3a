"""`Ledger`: the one way into the ledger for every front door (CLI, service, dashboard), the experiment
comparisons, the price commands and the benches. Every read and the few writes outside the writer
(re-pricing, rebuilding the totals) are methods here, built from the schema's Table objects; nothing
outside tracing/ledger/ writes SQL.

    Ledger.open(where)        read-write: migrates a ledger that needs it; a pooled, bounded engine
    Ledger.open_read(where)   never migrates: a read-only SQLite file (with pending migrations it reads
                              a migrated copy in memory), or a PostgreSQL server as it is
    Ledger.readable(where)    read-write when the ledger takes writes, else read-only (`rag report`)
"""
from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Engine, cast, distinct, func, insert, select
from sqlalchemy.sql import ColumnElement

from rag_app.core import RagError
from rag_app.core import JUDGE_KIND, judge_run_id
from rag_app.config import LedgerTarget, LedgerURLError, as_target
from tracing.ledger import budgets, keys, quality_groups, reports, review, rollups, series, views
from tracing.ledger.engine import (
    Bounds,
    config_error,
    is_transient,
    make_engine,
    memory_engine,
    redacted_error,
)
from tracing.ledger.migrations import migrate, pending
from tracing.ledger.rollups import number
from tracing.ledger.schema import (
    FLOAT,
    INT,
    UNKNOWN_ROWS,
    experiment_events,
    ledger_losses,
    ledger_quarantine,
    queries,
    query_citations,
    query_feedback,
    query_quality,
    query_totals,
    report_rollup,
    repricings,
    saving_repricings,
    stage_calls,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
SERVICE_BOUNDS = Bounds(connect_s=5.0, statement_s=5.0, pool_size=5, max_overflow=5)  # a frozen server: 503 in ~5 s
CLI_BOUNDS = Bounds(connect_s=10.0, statement_s=60.0, pool_size=1, max_overflow=1)
TABLE_PRICED = ("genai-prices", "bundled", "override", "unpriced")


def _cost_sums(costs) -> Any:
    """The rollups' cost sums (n, sum, sum of squares; shadow alike) over per-query costs."""
    c, f = costs.c, lambda col: cast(col, FLOAT)
    return select(func.count(c.cost_nano_usd).label("priced_queries"),
                  cast(func.coalesce(func.sum(c.cost_nano_usd), 0), INT).label("cost_nano_usd"),
                  func.coalesce(func.sum(f(c.cost_nano_usd) * f(c.cost_nano_usd)), 0.0).label("cost_sq"),
                  func.count(c.shadow_cost_nano_usd).label("shadow_queries"),
                  cast(func.coalesce(func.sum(c.shadow_cost_nano_usd), 0), INT).label("shadow_cost_nano_usd"),
                  func.coalesce(func.sum(f(c.shadow_cost_nano_usd) * f(c.shadow_cost_nano_usd)), 0.0).label("shadow_sq"))


class LedgerUnavailable(RagError):
    """The ledger cannot be reached or read now; the message is one line, with no credential in it."""


@dataclass
class ArmSums:
    """One experiment arm as the rollups hold it: sums, per-stage tokens, and how to read percentiles."""
    sums: dict[str, Any]
    tokens: dict[str, dict[str, int]]
    latency_nulls: int
    percentile: Any = field(repr=False)  # (column, n, p) -> value
    repriced_rows: int = 0  # > 0: the cost sums and percentiles are the re-priced figures (`rag reprice`)


class Ledger:
    def __init__(self, engine: Engine, target: LedgerTarget, pending_migrations: Sequence[str] = ()):
        self.engine = engine
        self.target = target
        self.pending = list(pending_migrations)

    # -- opening ------------------------------------------------------------------------------------
    @classmethod
    def open(cls, where: Any, *, bounds: Bounds = CLI_BOUNDS) -> Ledger:
        target = as_target(where)
        engine = make_engine(target, bounds=bounds)
        try:
            migrate(engine)
        except Exception as e:
            engine.dispose()
            raise _translated(target, e) from None
        return cls(engine, target)

    @classmethod
    def attach(cls, where: Any, *, bounds: Bounds = SERVICE_BOUNDS) -> Ledger:
        """A reader on a ledger a writer of this process has migrated already (the service): no check
        at all until the first call, which fails fast (LedgerUnavailable / transient) when it cannot."""
        target = as_target(where)
        return cls(make_engine(target, bounds=bounds), target)

    @classmethod
    def open_read(cls, where: Any, *, bounds: Bounds = CLI_BOUNDS, migrated_copy: bool = False) -> Ledger:
        """Never migrates the ledger. A SQLite file whose folder is read-only is opened immutable (nobody
        can be writing it); with `migrated_copy`, one with migrations pending is read through a migrated
        copy in memory (readers expect today's schema; `.pending` says what the file lacks)."""
        target = as_target(where)
        if target.dialect == "postgresql":
            engine = make_engine(target, bounds=bounds)
            try:
                with engine.connect() as db:
                    todo = pending(db)
            except Exception as e:
                engine.dispose()
                raise _translated(target, e) from None
            return cls(engine, target, todo)
        last: Exception | None = None
        for immutable in (False, True):
            engine = make_engine(target, bounds=bounds, read_only=True, immutable=immutable)
            try:
                with engine.connect() as db:
                    todo = pending(db)
                break
            except Exception as e:
                last = e
                engine.dispose()
        else:
            raise _translated(target, last) from None  # type: ignore[arg-type]
        if todo and migrated_copy:  # migrate a copy in memory and leave the file untouched
            assert target.path is not None  # a SQLite target names its file
            source = sqlite3.connect(f"{target.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            copy = sqlite3.connect(":memory:", check_same_thread=False)
            source.backup(copy)
            source.close()
            engine.dispose()
            engine = memory_engine(copy)
            migrate(engine)
            with engine.begin() as db:
                while rollups.refold_step(db, 5000):  # the copy's totals, folded at once (it is ours alone)
                    pass
        return cls(engine, target, todo)

    @classmethod
    def readable(cls, where: Any, *, bounds: Bounds = CLI_BOUNDS) -> Ledger:
        target = as_target(where)
        if target.dialect == "sqlite" and not target.exists():
            raise LedgerUnavailable(f"no ledger at {target.display}; run `rag ask` first or set RAG_DATA_DIR")
        try:
            return cls.open(target, bounds=bounds)
        except LedgerUnavailable:
            if target.dialect == "postgresql":
                raise
            log.warning("ledger %s not writable; reading it read-only", target.display)
        return cls.open_read(target, bounds=bounds, migrated_copy=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self):
        return self.engine.connect()

    # -- one query ----------------------------------------------------------------------------------
    def stage_rows(self, query_id: str) -> list[dict]:
        with self._read() as db:
            return reports.stage_rows(db, query_id)

    def query(self, query_id: str) -> dict | None:
        with self._read() as db:
            row = db.execute(reports.listing([query_totals.c.query_id == query_id])).mappings().first()
        return None if row is None else dict(row)

    def arm_quality(self, experiment: str, variant: str, side: str) -> dict:
        """An arm's answer quality: how many answers were scored (source `local`), the mean of each
        quality metric (QUALITY_METRICS: groundedness, invalid-citation rate, refusal rate, users' feedback
        score, the judge's score and faithfulness; None without data), and under `_moments` the (n, sum, sum of squares) the verdict reads, all from the
        rollups (m022)."""
        r = report_rollup
        with self._read() as db:
            sums = db.execute(select(*quality_groups.quality_sums()).where(
                r.c.dim == "all", r.c.experiment == experiment, r.c.variant == variant, r.c.side == side)).mappings().one()
        moments = quality_groups.moments_of(sums)
        means = {m: moments[m][1] / moments[m][0] if m in moments else None for m in QUALITY_METRICS}
        return {"scored": moments.get("invalid_citation_rate", (0,))[0], **means, "_moments": moments}

    def quality_summary(self, variant: str | None = None, judge_right_above: float = 0.5) -> dict:
        """Every scored answer (source `local`) and users' feedback, optionally of one variant, from the
        rollups: what `rag report` and /v1/reports/summary show beside the cost; the refusal rate (over
        answers scored since refusals were kept); and how often the judge agrees with users where both
        graded an answer."""
        r, t = report_rollup, queries
        ids = select(t.c.query_id).where(t.c.kind == "query", *([t.c.variant == variant] if variant else []))
        with self._read() as db:
            sums = db.execute(select(*quality_groups.quality_sums()).where(
                r.c.dim == "all", *([r.c.variant == variant] if variant else []))).mappings().one()
            agreement = review.judge_agreement(db, ids, right_above=judge_right_above)
        q = quality_groups.fields_of(sums)
        up, down = q["feedback_up"], q["feedback_down"]
        return {"scored_answers": q["scored"], "mean_groundedness": q["groundedness"],
                "invalid_citation_rate": q["invalid_citation_rate"],
                "refusals": int(number(sums["refusal_yes"]) or 0), "refusal_rate": q["refusal_rate"],
                "feedback": {"right": up, "unsure": q["feedback_count"] - up - down, "wrong": down},
                "judge_agreement": agreement}

    def quality(self, query_id: str) -> dict | None:
        """The answer's quality signals as the answer showed them ({groundedness, invalid_citations (the
        list), retrieval_confidence, refusal, claims (the list)}; source `local`), or None when none were
        recorded (an error, a query before m013). `refusal` and `claims` are null for an answer scored
        before they were kept."""
        q = query_quality
        with self._read() as db:
            rows = db.execute(select(q.c.metric, q.c.value, q.c.detail)
                              .where(q.c.query_id == query_id, q.c.source == "local")).all()
        if not rows:
            return None
        out: dict = {"groundedness": None, "invalid_citations": [], "retrieval_confidence": None, "refusal": None,
                     "claims": None}
        for metric, value, detail in rows:
            out[metric] = json.loads(detail) if detail is not None else value
        if out["refusal"] is not None:
            out["refusal"] = bool(out["refusal"])
        return out

    def judge(self, query_id: str) -> dict | None:
        """The judge's grades of this answer (source `judge`: faithfulness, relevance, judge_score, with its
        reason, model and prompt version) and what its run cost (evaluation spend, not the query's), or
        None when the answer was not judged (off, not sampled, dropped, or not yet)."""
        q, t, r = query_quality, query_totals, queries
        run_id = judge_run_id(query_id)
        with self._read() as db:
            grades = db.execute(select(q.c.metric, q.c.value, q.c.detail, q.c.recorded_at)
                                .where(q.c.query_id == query_id, q.c.source == JUDGE_KIND)).all()
            run = db.execute(select(r.c.status, r.c.error, t.c.stage_rows, t.c.cost_nano_usd)
                             .select_from(r.outerjoin(t, t.c.query_id == r.c.query_id))
                             .where(r.c.query_id == run_id)).mappings().first()
        if not grades and run is None:
            return None
        from rag_app.core import usd_json

        out: dict = {"faithfulness": None, "relevance": None, "judge_score": None, "reason": None, "model": None,
                     "prompt_version": None, "recorded_at": None}
        for metric, value, detail, at in grades:
            out[metric] = value
            out["recorded_at"] = at
            if detail is not None and metric == "judge_score":
                out.update({k: v for k, v in json.loads(detail).items() if k in ("reason", "model", "prompt_version")})
        run = dict(run or {})
        return {**out, "status": run.get("status"), "error": run.get("error"), "calls": int(run.get("stage_rows") or 0),
                "cost_usd": usd_json(run["cost_nano_usd"]) if run.get("cost_nano_usd") is not None else None}

    def list_queries(self, *, variant: str | None = None, status: str | None = None, since: str | None = None,
                     until: str | None = None, experiment: str | None = None, limit: int = 50,
                     offset: int = 0, user: str | None = None, user_id: str | None = None, key: str | None = None,
                     quality: dict | None = None) -> tuple[int, list[dict]]:
        """(how many match, one page of them), newest first, each with its own quality (QUERY_QUALITY_FIELDS)
        and, under `billed`, what grading it cost (`evaluation_cost_usd`) and each billed stage's tokens and
        cost (the per-query columns of `rag report`, every stage the ledger's rows name). `user`: only that
        user's (a member key); `user_id`, `key`: an admin's filters; `quality`: the list's quality filters
        (quality_groups.query_filters: marked_wrong, unsupported, refusal, invalid_citations, grounded_below)."""
        from rag_app.core import usd_json

        t = query_totals
        where: list[ColumnElement] = []
        for col, val, op in ((t.c.variant, variant, "eq"), (t.c.status, status, "eq"), (t.c.started_at, since, "ge"),
                             (t.c.started_at, until, "lt"), (t.c.experiment, experiment, "eq"), (t.c.user_id, user, "eq"),
                             (t.c.user_id, user_id, "eq"), (t.c.api_key_id, key, "eq")):
            if val is not None:
                where.append(col == val if op == "eq" else col >= val if op == "ge" else col < val)
        where += quality_groups.query_filters(**(quality or {}))
        with self._read() as db:
            if not where or (variant is not None and len(where) == 1):
                # the unfiltered (or per-variant) count is in the day rollups
                r = report_rollup
                total = db.execute(select(func.coalesce(func.sum(r.c.queries), 0))
                                   .where(r.c.dim == "all", *([r.c.variant == variant] if variant else []))).scalar()
            else:
                total = db.execute(select(func.count()).select_from(t).where(t.c.kind == "query", *where)).scalar()
            rows = [dict(r) for r in db.execute(reports.listing(where).limit(limit).offset(offset)).mappings()]
            ids = [r["query_id"] for r in rows]
            kept = self.quality_kept()
            scores = quality_groups.per_query(db, ids) if kept else {}
            parts, judged = reports.page_parts(db, ids)
            stages = reports.billed_stages(db) if rows else []
        return int(number(total)), [
            {**r, **scores.get(r["query_id"], quality_groups.unknown_query()),
             "billed": {"evaluation_cost_usd": usd_json(judged.get(r["query_id"])),
                        **reports.stage_columns(parts[r["query_id"]], stages)}} for r in rows]

    # -- reports ------------------------------------------------------------------------------------
    def report(self, last: int | None = None, variant: str | None = None, prices: str = "original",
               rows: int | None = None) -> reports.Report:
        with self._read() as db:
            return reports.build_report(db, last=last, variant=variant, prices=prices, rows=rows,
                                        quality=self.quality_kept())

    def report_full(self, last: int | None = None, variant: str | None = None,
                    prices: str = "original") -> reports.Report:
        with self._read() as db:
            return reports.build_report_full(db, last=last, variant=variant, prices=prices,
                                             quality=self.quality_kept())

    def report_totals(self, last: int | None = None, variant: str | None = None) -> dict:
        with self._read() as db:
            return reports.report_totals(db, last=last, variant=variant)

    def iter_query_rows(self, variant: str | None = None, last: int | None = None, raw: bool = False) -> Iterator[dict]:
        with self._read() as db:
            yield from reports.iter_query_rows(db, variant=variant, last=last, raw=raw, quality=self.quality_kept())

    def by(self, dim: str, variant: str | None = None) -> list[dict]:
        """`rag report --by` rows: the spend, then (every dim but `stage`) the answers' quality and feedback
        (`scored`, `groundedness`, `invalid_citation_rate`, `feedback_up`/`_down`/`_count`; null on a
        ledger that predates them, counts 0 and means null where nothing was scored or said)."""
        known = self.quality_kept()
        with self._read() as db:
            rows = reports.by_report(db, dim, variant=variant)
            per = (quality_groups.by_quality(db, dim, variant=variant) or {}) if known else {}
        if dim == "stage":  # a stage has no answer of its own
            return rows
        return [{**r, **per.get(r[dim], quality_groups.blank(known))} for r in rows]

    def quality_over_time(self, since: str, until: str, variant: str | None = None) -> list[dict]:
        """Per day and variant: cost per query beside mean groundedness, invalid-citation rate and feedback
        (the dashboard's quality chart; `GET /v1/reports/quality`)."""
        with self._read() as db:
            rows = quality_groups.over_time(db, since, until, variant=variant)
        if not self.quality_kept():
            rows = [{**r, **quality_groups.blank(False)} for r in rows]
        return rows

    def quality_kept(self) -> bool:
        """False on a ledger that predates answer quality or feedback (read through a migrated copy)."""
        return not {"m013_answer_quality", "m014_query_feedback"} & set(self.pending or ())

    # -- the ledger itself --------------------------------------------------------------------------------
    def audit(self) -> dict:
        """Rows that lost their query, LLM attempts whose outcome is unknown, and rows the writer
        quarantined, spilled or lost."""
        with self._read() as db:
            t = query_totals
            o = db.execute(select(func.coalesce(func.sum(t.c.stage_rows), 0), func.count(),
                                  func.sum(t.c.priced_cost_nano_usd)).where(t.c.kind.is_(None))).one()
            s = stage_calls
            u = db.execute(select(func.count(), func.sum(s.c.cost_nano_usd), func.sum(s.c.input_tokens))
                           .where(UNKNOWN_ROWS)).one()
            quarantined = db.execute(select(func.count()).select_from(ledger_quarantine)).scalar()
            losses = dict(db.execute(select(ledger_losses.c.kind, func.sum(ledger_losses.c.rows))
                                     .group_by(ledger_losses.c.kind)).all())
            stale, backlog, refolding = rollups.stale(db), rollups.dirty_count(db), rollups.refold_pending(db)
        from rag_app.core import usd_json

        return {"orphan_stage_rows": int(number(o[0])), "orphan_queries": o[1],
                "orphan_cost_usd": usd_json(number(o[2]) or 0), "unknown_attempts": u[0],
                "unknown_attempts_input_tokens": int(number(u[2])), "unknown_attempts_cost_usd": usd_json(number(u[1])),
                "quarantined_rows": quarantined, "spilled_rows": int(number(losses.get("spilled"))),
                "replayed_rows": int(number(losses.get("replayed"))), "lost_rows": int(number(losses.get("lost"))),
                "totals_stale": stale, "totals_backlog_queries": backlog, "totals_refolding": refolding}

    def rebuild_totals(self) -> int:
        return rollups.rebuild(self.engine)

    def fold_backlog(self, limit: int = 100_000) -> int:
        """Fold pending queries into the totals now (a batch per transaction), up to `limit` queries."""
        done = 0
        while done < limit:
            with self.engine.begin() as db:
                n = rollups.fold_dirty(db, (), 2000) or rollups.refold_step(db, 2000)
            if not n:
                break
            done += n
        return done

    # -- experiments ----------------------------------------------------------------------------------------
    def arm(self, experiment: str, variant: str, side: str, prices: str = "best") -> ArmSums:
        """An arm's live (or shadow) queries: sums from the rollups, percentiles by index walks. With
        `prices="best"`, an arm any of whose rows `rag reprice` re-priced reads its cost from the re-priced
        figures (per query, from the rows: slower, but only when there is something re-priced); "original"
        reads the figures as recorded."""
        r, t = report_rollup, query_totals
        key = [r.c.experiment == experiment, r.c.variant == variant, r.c.side == side]
        with self._read() as db:
            sums = dict(db.execute(reports._rollup_sums([r.c.dim == "all", *key])).mappings().one())
            tokens = {row[0]: {"input_tokens": int(number(row[1])), "output_tokens": int(number(row[2]))}
                      for row in db.execute(select(r.c.value, func.sum(r.c.input_tokens), func.sum(r.c.output_tokens))
                                            .where(r.c.dim == "stage", *key).group_by(r.c.value))}
            arm = [t.c.kind == "query", t.c.experiment == experiment, t.c.variant == variant, t.c.side == side]
            nulls = db.execute(select(func.count()).select_from(t).where(*arm, t.c.latency_ms.is_(None))).scalar()
            arm_ids = select(t.c.query_id).where(*arm)
            # driven from the re-pricings (few, often none) to the arm's rows, never from the arm's 333k
            # queries to their stage rows (that walk took 2-4 s at 1M queries with no re-pricing at all)
            repriced = 0 if prices == "original" else int(db.execute(
                select(func.count(distinct(repricings.c.stage_call_id)))
                .select_from(repricings.join(stage_calls, stage_calls.c.id == repricings.c.stage_call_id)
                             .join(t, t.c.query_id == stage_calls.c.query_id))
                .where(*arm)).scalar() or 0)
            costs = None
            if repriced:  # decisions read the best figures: each query's cost by its latest re-priced rows
                rs = views.stage_calls_repriced().where(stage_calls.c.query_id.in_(arm_ids)).subquery("s")
                costs = views.query_costs(rs).where(queries.c.query_id.in_(arm_ids)).subquery("c")
                sums.update(db.execute(_cost_sums(costs)).mappings().one())
        source = select(t).where(*arm).subquery("t")

        def percentile(column: str, n: int, p: float, nulls_as_zero: int = 0) -> float | None:
            src = costs if costs is not None and column in ("cost_nano_usd", "shadow_cost_nano_usd") else source
            with self._read() as db:
                if not nulls_as_zero:
                    return reports.percentile_of(db, src, column, n, p)
                return reports.percentile_nulls_as_zero(db, src, column, n, nulls_as_zero, p)
        return ArmSums(sums, tokens, int(nulls or 0), percentile, repriced)

    def arm_series(self, experiment: str, arms: Sequence[tuple[str, str]], every: str,
                   quality: bool = True) -> tuple[list[dict], dict]:
        """An experiment's arms ((variant, side) pairs) per hour or day, oldest first: the rollup sums of each
        bucket, and (`quality`) the quality moments of each bucket's answers (tracing/ledger/series.py)."""
        with self._read() as db:
            sums = series.arm_sums(db, experiment, arms, every)
            return sums, (series.quality_sums(db, experiment, arms, every) if quality and sums else {})

    def query_costs(self, query_ids: Sequence[str]) -> dict[str, tuple[int | None, int | None]]:
        """(cost, shadow) in nano-dollars of each of these queries that the ledger has."""
        t = query_totals
        out = {}
        with self._read() as db:
            for i in range(0, len(query_ids), 400):
                for row in db.execute(select(t.c.query_id, t.c.cost_nano_usd, t.c.shadow_cost_nano_usd)
                                      .where(t.c.query_id.in_(list(query_ids[i:i + 400])))):
                    out[row[0]] = (row[1], row[2])
        return out

    # -- ramps (rag_app/experiments/ramp.py) ------------------------------------------------------------
    def experiment_events(self, experiment: str) -> list[dict]:
        """A ramp's moves, oldest first; the last one's to_pct is the rollout every replica serves."""
        e = experiment_events
        with self._read() as db:
            return [dict(r) for r in db.execute(select(e).where(e.c.experiment == experiment)
                                                .order_by(e.c.seq)).mappings()]

    def add_experiment_event(self, event: dict) -> bool:
        """Write one ramp move at its `seq`; False when another replica wrote that move first."""
        from sqlalchemy.exc import IntegrityError

        try:
            with self.engine.begin() as db:
                db.execute(insert(experiment_events).values(**event))
        except IntegrityError:
            return False
        return True

    def step_counts(self, experiment: str, since: str | None) -> dict[str, dict[str, int]]:
        """Live queries per variant since a ramp step began (all of them when `since` is None):
        {variant: {"queries": n, "sticky": n}}; the sticky ones are what the sample-ratio check counts."""
        t = query_totals
        where = [t.c.kind == "query", t.c.experiment == experiment, t.c.side == "live"]
        if since is not None:
            where.append(t.c.started_at >= since)
        with self._read() as db:
            rows = db.execute(select(t.c.variant, func.count(), func.coalesce(func.sum(t.c.sticky), 0))
                              .where(*where).group_by(t.c.variant)).all()
        return {r[0]: {"queries": int(r[1]), "sticky": int(number(r[2]))} for r in rows}

    # -- prices -----------------------------------------------------------------------------------------
    def mean_output_tokens(self, model: str) -> float | None:
        s = stage_calls
        with self._read() as db:
            v = db.execute(select(func.avg(s.c.output_tokens)).where(
                s.c.model == model, s.c.stage == "generate", s.c.status == "ok", s.c.usage_source == "provider",
                s.c.output_tokens > 0)).scalar()
        return None if v is None else float(v)

    def unpriced_models(self, prices) -> list[dict]:
        """Models in the ledger that today's table cannot price (at each model's latest call)."""
        from tracing.pricing import readable_time

        s = stage_calls
        out = []
        with self._read() as db:
            for model, provider, rows, tokens, last in db.execute(
                    select(s.c.model, s.c.provider, func.count(), func.sum(s.c.input_tokens + s.c.output_tokens),
                           func.max(s.c.started_at))
                    .where(s.c.model.is_not(None), s.c.price_source.in_(TABLE_PRICED))
                    .group_by(s.c.model, s.c.provider).order_by(s.c.model)):
                q = prices.quote(model, 1000, 100, provider=provider, at=readable_time(last))
                if q.source == "unpriced":
                    recorded = db.execute(select(func.count()).select_from(s).where(
                        s.c.model == model, s.c.price_source == "unpriced")).scalar()
                    out.append({"model": model, "provider": provider, "rows": rows, "unpriced_rows": recorded,
                                "tokens": int(number(tokens)), "last_seen": last, "why": q.warning})
        return out

    def price_warnings(self) -> list[dict]:
        """Rows priced with a warning (e.g. a holiday calendar that did not cover the call's year), per
        model, provider and warning: how many, and the first and last call."""
        s, q = stage_calls, queries
        with self._read() as db:
            rows = [dict(r) for r in db.execute(
                select(s.c.model, s.c.provider, s.c.price_warning.label("warning"), func.count().label("rows"),
                       func.min(s.c.started_at).label("first_seen"), func.max(s.c.started_at).label("last_seen"))
                .where(s.c.price_warning.is_not(None))
                .group_by(s.c.model, s.c.provider, s.c.price_warning).order_by(s.c.model)).mappings()]
            # answer-cache hits whose saving was priced with a warning, booked to the model that answered
            origin = s.alias("o")
            model = (select(func.max(origin.c.model)).where(origin.c.query_id == q.c.cached_from,
                                                             origin.c.stage == "generate").scalar_subquery())
            hits = select(model.label("model"), q.c.price_warning.label("warning"), q.c.started_at).where(
                q.c.cache_hit == 1, q.c.price_warning.is_not(None)).subquery("h")
            rows += [{**dict(r), "provider": None, "hits": True} for r in db.execute(
                select(hits.c.model, hits.c.warning, func.count().label("rows"),
                       func.min(hits.c.started_at).label("first_seen"), func.max(hits.c.started_at).label("last_seen"))
                .group_by(hits.c.model, hits.c.warning).order_by(hits.c.model)).mappings()]
            return rows

    def unpriced_rows_now(self) -> int:
        """Stage rows whose latest figure (re-priced or original) is unpriced."""
        v = views.stage_calls_repriced().subquery("c")
        with self._read() as db:
            return int(db.execute(select(func.count()).select_from(v).where(v.c.price_source == "unpriced")).scalar())

    def repriced_rows(self, query_ids: Sequence[str] | None = None) -> int:
        """How many stage rows (of these queries, or of the whole ledger) have a re-priced figure."""
        r = repricings
        sel = select(func.count(distinct(r.c.stage_call_id)))
        if query_ids:
            sel = sel.select_from(r.join(stage_calls, stage_calls.c.id == r.c.stage_call_id)).where(
                stage_calls.c.query_id.in_(list(query_ids)))
        with self._read() as db:
            return int(db.execute(sel).scalar() or 0)

    def reprice_candidates(self, since: str | None = None, model: str | None = None) -> list[dict]:
        s, c = stage_calls, views.stage_calls_repriced().subquery("c")
        sel = (select(s.c.id, s.c.model, s.c.input_tokens, s.c.output_tokens, s.c.cached_tokens, s.c.cache_write_tokens,
                      s.c.provider, s.c.endpoint, s.c.status, s.c.started_at, s.c.usage_raw, c.c.cost_nano_usd,
                      c.c.shadow_cost_nano_usd, c.c.price_source, c.c.price_version)
               .select_from(s.join(c, c.c.id == s.c.id))
               .where(c.c.price_source.in_(TABLE_PRICED), s.c.model.is_not(None)).order_by(s.c.id))
        if since:
            sel = sel.where(s.c.started_at >= since)
        if model:
            sel = sel.where(s.c.model == model)
        with self._read() as db:
            return [dict(r) for r in db.execute(sel).mappings()]

    def hit_reprice_candidates(self, since: str | None = None) -> list[dict]:
        """Answer-cache hits (since `since`) with what they saved as last figured (the latest re-priced saving,
        else the recorded one) and the calls of the answer they served (`rows`: its `ok` stage rows, what a
        live call would bill again). A hit from before its origin was recorded has no rows (None)."""
        q, s, r = queries, stage_calls, saving_repricings
        latest = select(func.max(r.c.id)).where(r.c.query_id == q.c.query_id).scalar_subquery()
        r2 = r.alias("r2")  # not `r`: the inner max() must stay correlated to the hit, not to this row
        last = select(r2.c.saved_cost_nano_usd).where(r2.c.id == latest).scalar_subquery()
        sel = (select(q.c.query_id, q.c.started_at, q.c.cached_from, q.c.saved_cost_nano_usd,
                      latest.label("repriced_id"), last.label("repriced_nano"))
               .where(q.c.cache_hit == 1).order_by(q.c.started_at, q.c.query_id))
        if since:
            sel = sel.where(q.c.started_at >= since)
        with self._read() as db:
            hits = [dict(h) for h in db.execute(sel).mappings()]
            origins = sorted({h["cached_from"] for h in hits if h["cached_from"]})
            rows: dict[str, list[dict]] = {}
            for i in range(0, len(origins), 500):
                for row in db.execute(select(s.c.query_id, s.c.stage, s.c.model, s.c.status, s.c.input_tokens,
                                             s.c.output_tokens, s.c.cached_tokens, s.c.cache_write_tokens, s.c.provider,
                                             s.c.endpoint, s.c.usage_raw, s.c.cost_nano_usd, s.c.shadow_cost_nano_usd,
                                             s.c.price_source)
                                      .where(s.c.query_id.in_(origins[i:i + 500]), s.c.status == "ok")).mappings():
                    rows.setdefault(row["query_id"], []).append(dict(row))
        for h in hits:
            h["saved_now"] = h.pop("repriced_nano") if h.pop("repriced_id") is not None else h["saved_cost_nano_usd"]
            h["rows"] = rows.get(h["cached_from"]) if h["cached_from"] else None
        return hits

    def add_saving_repricings(self, rows: list[dict]) -> None:
        """Append re-priced savings of answer-cache hits (the hits' own figures are never changed)."""
        if rows:
            with self.engine.begin() as db:
                db.execute(insert(saving_repricings), rows)

    def add_repricings(self, rows: list[dict]) -> None:
        """Append re-priced figures (the originals on stage_calls are never changed)."""
        if rows:
            with self.engine.begin() as db:
                db.execute(insert(repricings), rows)


    # -- budgets (tracing/ledger/budgets.py; the rules are rag_app/spend/budgets.py's) ------------------
    def budget_spend(self, dim: str, since: str, value: str | None = None) -> dict[str, dict[str, int]]:
        """Billed spend per key, user or variant since an instant: priced nano-dollars, unpriced calls, queries."""
        with self._read() as db:
            return budgets.spend(db, dim, since, value)

    def budget_tx(self, decide: Callable[[budgets.BudgetTx], T]) -> T:
        """`decide(tx)` inside one transaction under the budget lock every replica takes."""
        with self.engine.begin() as db:
            budgets.lock(db)
            return decide(budgets.BudgetTx(db))

    def budget_events(self, since: str, limit: int = 100, who: dict[str, str | None] | None = None) -> list[dict]:
        """`who` ({"key": name, "user": id}): only the events of that key and user (a member's)."""
        with self._read() as db:
            return budgets.events(db, since, limit, who)

    def add_feedback(self, query_id: str, user_id: str, score: int, comment: str | None, at: str) -> dict:
        """A user's word on an answer; the same user's second word replaces the first. Folded into the
        query's totals in the same transaction (m022): the lists and charts count it at once."""
        f = query_feedback
        row = {"query_id": query_id, "user_id": user_id, "score": score, "comment": comment, "recorded_at": at}
        with self.engine.begin() as db:
            ins = rollups._insert(db, f).values(**row)
            db.execute(ins.on_conflict_do_update(index_elements=["query_id", "user_id"],
                                                 set_={"score": score, "comment": comment, "recorded_at": at}))
            rollups.fold_dirty(db, [query_id])
        return row

    def review(self, score: int = -1, limit: int = 50) -> list[dict]:
        """The latest answers users gave `score` (-1: marked wrong), with the question and its groundedness:
        the review list."""
        f, t, q = query_feedback, queries, query_quality
        grounded = (select(q.c.value).where(q.c.query_id == f.c.query_id, q.c.metric == "groundedness",
                                            q.c.source == "local").scalar_subquery())
        with self._read() as db:
            return [dict(r) for r in db.execute(
                select(f.c.query_id, t.c.question, t.c.variant, f.c.user_id, f.c.score, f.c.comment,
                       f.c.recorded_at, grounded.label("groundedness"))
                .select_from(f.outerjoin(t, t.c.query_id == f.c.query_id))
                .where(f.c.score == score).order_by(f.c.recorded_at.desc()).limit(limit)).mappings()]

    def to_review(self, grounded_below: float = 0.5, limit: int = 50, *, judge_below: float = 0.5,
                  refusals: bool = False) -> list[dict]:
        """The review list: answers users marked wrong, grounded at most `grounded_below`, citing what was
        not sent, or judged faithful at most `judge_below`, newest first, each saying why (`marked_wrong`,
        `low_grounded`, `invalid_citation`, `judge_unfaithful`) with its unsupported claims and the users'
        comment. `refusals`: the answers that refused instead (why `refusal`)."""
        with self._read() as db:
            return review.to_review(db, grounded_below, judge_below, limit, refusals)

    def marked_answers(self, collection: str | None = None) -> list[dict]:
        """Every answer users marked right or wrong, with its question and the passages it cited, oldest first:
        what `rag train-adapter --from-feedback` learns from. An answer's mark is its users' net word (right
        when more said right than wrong, wrong when more said wrong; a tie or only `unsure` is no mark);
        `collection`: only answers that read it (answers recorded before m023 name none and are left out,
        as they have no citations)."""
        f, t, c = query_feedback, queries, query_citations
        net = (select(f.c.query_id, func.sum(f.c.score).label("net"), func.count().label("marks"))
               .where(f.c.score != 0).group_by(f.c.query_id).subquery("net"))
        with self._read() as db:
            marked = db.execute(
                select(net.c.query_id, net.c.net, net.c.marks, t.c.question, t.c.variant, t.c.started_at)
                .join_from(net, t, t.c.query_id == net.c.query_id)
                .where(net.c.net != 0, t.c.question.is_not(None))
                .order_by(t.c.started_at, net.c.query_id)).mappings().all()
            cited: dict[str, list[dict]] = {}
            ids = [r["query_id"] for r in marked]
            for i in range(0, len(ids), 500):
                where: list[ColumnElement[bool]] = [c.c.query_id.in_(ids[i:i + 500])]
                if collection is not None:
                    where.append(c.c.collection == collection)
                for r in db.execute(select(c.c.query_id, c.c.position, c.c.collection, c.c.chunk_id, c.c.doc,
                                           c.c.char_start, c.c.char_end).where(*where)
                                    .order_by(c.c.query_id, c.c.position)).mappings():
                    cited.setdefault(r["query_id"], []).append(dict(r))
        return [{"query_id": r["query_id"], "question": r["question"], "variant": r["variant"],
                 "score": 1 if r["net"] > 0 else -1, "marks": int(r["marks"]), "started_at": r["started_at"],
                 "citations": cited.get(r["query_id"], [])} for r in marked
                if r["query_id"] in cited or collection is None]

    def feedback(self, query_id: str) -> list[dict]:
        f = query_feedback
        with self._read() as db:
            return [dict(r) for r in db.execute(select(f.c.user_id, f.c.score, f.c.comment, f.c.recorded_at)
                                                .where(f.c.query_id == query_id).order_by(f.c.recorded_at))
                    .mappings()]

    def set_budget_webhook(self, event_id: int, status: str) -> None:
        with self.engine.begin() as db:
            budgets.set_webhook(db, event_id, status)

    def prune_budget_reservations(self, before: str) -> int:
        with self.engine.begin() as db:
            return budgets.prune_reservations(db, before)

    # -- keys and teams (rag_app/access/) --------------------------------------------------------------
    def create_key(self, row: dict[str, Any], audit: dict[str, Any]) -> bool:
        """The key and its audit row in one transaction; False (nothing written) when the name is taken."""
        with self.engine.begin() as db:
            if not keys.create(db, row):
                return False
            keys.audit(db, audit)
            return True

    def change_key(self, name: str, values: dict[str, Any], audit: dict[str, Any]) -> bool:
        with self.engine.begin() as db:
            if not keys.change(db, name, values):
                return False
            keys.audit(db, audit)
            return True

    def list_keys(self) -> list[dict]:
        with self._read() as db:
            return keys.all_keys(db)

    def key_by_secret(self, secret_sha256: str) -> dict | None:
        with self._read() as db:
            return keys.by_secret(db, secret_sha256)

    def any_keys(self) -> bool:
        with self._read() as db:
            return keys.any_keys(db)

    def add_audit(self, row: dict[str, Any]) -> None:
        with self.engine.begin() as db:
            keys.audit(db, row)

    def last_audit(self, action: str, target: str) -> dict | None:
        with self._read() as db:
            return keys.last_audit(db, action, target)

    def key_audit(self, limit: int = 100) -> list[dict]:
        with self._read() as db:
            return keys.audit_rows(db, limit)

    def add_audits(self, rows: Sequence[dict[str, Any]]) -> None:
        """Several audit rows in one transaction (an upload's files): all are on the record, or none."""
        if rows:
            with self.engine.begin() as db:
                for row in rows:
                    keys.audit(db, row)

    def claim_collection(self, actor: str, collection: str, cap: int, audit: dict[str, Any]) -> bool:
        with self.engine.begin() as db:
            return keys.claim_collection(db, actor, collection, cap, audit)

    def collections_created(self, actor: str) -> list[str]:
        with self._read() as db:
            return keys.audits_of(db, actor, "create_collection")

    def rate_admit(self, key: str, now_ms: int, window_ms: int, rpm: int | None, tpm: int | None,
                   estimate: int) -> keys.RateStep:
        with self.engine.begin() as db:
            return keys.admit(db, key, now_ms, window_ms, rpm, tpm, estimate)

    def rate_settle(self, event_id: int, tokens: int) -> None:
        with self.engine.begin() as db:
            keys.settle(db, event_id, tokens)

    def rate_release(self, event_id: int) -> None:
        with self.engine.begin() as db:
            keys.release(db, event_id)

    def prune_rate_events(self, before_ms: int) -> int:
        with self.engine.begin() as db:
            return keys.prune_events(db, before_ms)


def _translated(target: LedgerTarget, e: BaseException) -> Exception:
    """One line, no credential: a setting to fix (LedgerURLError) or a ledger not reachable now."""
    msg = target.scrub(redacted_error(e))
    fix = config_error(target, e)
    if fix is not None:
        return fix
    if isinstance(e, LedgerURLError):
        return e
    if is_transient(e) or isinstance(e, (sqlite3.Error, OSError)):
        return LedgerUnavailable(f"ledger {target.display} unreachable or not writable now ({msg})")
    return e if isinstance(e, Exception) else RuntimeError(msg)


# the quality metrics an arm shows the mean of, each a guardrail an experiment can be judged by
# (rag_app/experiments/verdict.py QUALITY); all from the rollups' quality sums (quality_groups.ROLLUP_MOMENTS)
QUALITY_METRICS = ("groundedness", "invalid_citation_rate", "refusal_rate", "feedback_score", "judge_score",
                   "judge_faithfulness")
