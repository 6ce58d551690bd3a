"""Prepare files in a worker process that can be stopped: bounded seconds and megabytes per file.

A hostile file (a DOCX of a million empty paragraphs, a zip bomb, deeply nested HTML, megabytes of
never-seen Chinese that jieba's HMM crawls through at ~10k chars/s) must cost a bounded amount and
become that file's error; the batch goes on. Parser libraries and jieba cannot be interrupted from
a thread, so all of a file's work that grows with its content (parse, chunk, BM25 tokenization)
runs in a worker process forked from a forkserver (which has the loaders imported and jieba's
dictionary and the cl100k table loaded, rag_app/ingest/worker_preload.py). A worker is reused
across files: a fresh process per file cost ~0.4 s of CPU each (46 files: 17 of ingest's 32 s).

    parent                                  worker (serves one file after another)
    ------                                  ------
    send (format, work, MB) ------------->  import the parser for this format (once per format)
                 <------------------------  "ready"   (then RLIMIT_AS = its size now + RAG_PARSE_MAX_MB)
    wait RAG_PARSE_TIMEOUT_S                work(): load_document(path) -> chunker.chunk -> sparse.term_counts
                 <------------------------  (ParsedDocument, chunks with their terms) or the IngestError;
                                            the limit is lifted, the worker waits for the next file
    past the time: kill the worker; a file that ran out of memory or killed it: the worker is
    replaced. Either way that file is the error and the next file gets a fresh worker.

The memory budget is on top of what the worker maps when the file starts, so the limit means "what
this file may add", the same on every machine and for every file a worker serves (a worker whose
size grew by more than half a budget while serving files is retired rather than reused). What stays
in the server per chunk is cheap: BM25 weights from the counted terms (`sparse.weigh`) and, when the
dense leg is on, the embedding model. A chunker that calls the embedding model (semantic backend
"embedding", semantic-window) cannot go to the worker; then the file is parsed in the worker, chunked
in the server and tokenized in the worker.
"""
from __future__ import annotations

import inspect
import multiprocessing
import resource
import signal
import threading
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from rag_app.text import sparse
from rag_app.core import IngestError
from rag_app.ingest.loaders import FORMATS, load_document
from rag_app.core import Chunk, ParsedDocument

_IMPORT_TIMEOUT_S = 300  # importing unstructured's PDF stack can take a minute on a cold, busy machine


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _vm_size_bytes() -> int:
    return _status_bytes("VmSize")


def _peak_rss_bytes() -> int:
    """The worker's peak resident size since the current file started (_reset_peak_rss)."""
    return _status_bytes("VmHWM")


def _reset_peak_rss() -> None:
    """A reused worker's lifetime peak would hide a later file's growth; Linux resets it on request."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # then the peak is the worker's lifetime one: a memory error may read as a parse error


def with_terms(chunks: list[Chunk]) -> list[Chunk]:
    return [replace(c, terms=sparse.term_counts(c.indexed_text())) for c in chunks]


def _prepare(path: str, chunker, max_uncompressed_mb: float) -> tuple[ParsedDocument, list[Chunk] | None]:
    doc = load_document(Path(path), max_uncompressed_mb=max_uncompressed_mb)
    return doc, None if chunker is None else with_terms(chunker.chunk(doc))


def _job(conn, fmt: str, max_mb: float, work: Callable[[], object]) -> tuple[str, object]:
    """One file in the worker: its parser imported, then `work()` under RLIMIT_AS = size now + budget."""
    from rag_app.ingest.loaders import import_parser

    budget, peak_before = int(max_mb * 1024 * 1024), 0
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        import_parser(fmt)  # the parser's own size is not the file's cost: imported before the limit
        limit = _vm_size_bytes() + budget
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        _reset_peak_rss()
        peak_before = _peak_rss_bytes()
        conn.send("ready")
        return "ok", work()
    except MemoryError:
        return "memory", None
    except IngestError as e:
        # libxml2 reports a failed malloc as "XMLSyntaxError: unknown error": a parse that grew to
        # most of its budget and then failed ran out of memory, whatever the library called it.
        ran_out = _peak_rss_bytes() - peak_before > 0.6 * budget
        return ("memory", None) if ran_out else ("error", (e.reason, e.fix))
    except BaseException as e:  # noqa: BLE001 - anything a parser raises becomes this file's error
        return "error", (f"cannot parse ({type(e).__name__}: {str(e)[:300]})",
                         "the file is corrupt or not what its extension says; re-export it")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # raising the soft limit back is allowed


def _serve(conn) -> None:
    """The worker's loop: files one by one until the parent closes the pipe (or a file ran it out of
    memory: then it exits, its heap is not to be trusted)."""
    sparse.warm()  # preloaded by the forkserver already; a no-op then
    while True:
        try:
            fmt, max_mb, work = conn.recv()
        except (EOFError, OSError):
            return
        kind, value = _job(conn, fmt, max_mb, work)
        try:
            conn.send((kind, value, _vm_size_bytes()))
        except MemoryError:
            return  # the parent sees the pipe close: that file's memory error
        if kind == "memory":
            return


class _Worker:
    """A parse worker process and the parent's end of its pipe."""

    def __init__(self, ctx) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.baseline: int | None = None  # its size after its first file

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def grew(self, vm_now: int, max_mb: float) -> bool:
        if self.baseline is None:
            self.baseline = vm_now
        return vm_now - self.baseline > max_mb * 1024 * 1024 / 2


_idle: list[_Worker] = []
_idle_lock = threading.Lock()
_MAX_IDLE = 2  # ingest is one file at a time; the service may prepare an upload beside it


def _take_worker(ctx) -> _Worker:
    with _idle_lock:
        while _idle:
            worker = _idle.pop()
            if worker.proc.is_alive():
                return worker
            worker.kill()
    return _Worker(ctx)


def _give_back(worker: _Worker) -> None:
    with _idle_lock:
        if len(_idle) < _MAX_IDLE:
            _idle.append(worker)
            return
    worker.kill()


_RICH_PRELOAD = ["rag_app.ingest.unstructured_setup", "unstructured.partition.pdf", "unstructured.partition.docx",
                 "unstructured.partition.html"]
_server_started = False


def _context(fmt: str):
    """Children fork from a server with the loaders imported. The first file decides whether the
    server also preloads unstructured (~10 s once): a Markdown-only run never pays for it, and a
    child whose parser was not preloaded imports it itself, before its memory limit."""
    global _server_started
    ctx = multiprocessing.get_context("forkserver")
    if not _server_started:
        rich = fmt in ("pdf", "docx", "html")
        ctx.set_forkserver_preload(["rag_app.ingest.loaders", "rag_app.ingest.worker_preload", *(_RICH_PRELOAD if rich else [])])
        _server_started = True
    return ctx


def _run_limited(name: str, fmt: str, work: Callable[[], object], *, timeout_s: float, max_mb: float):
    """`work()` in a worker under the time and memory budget; a breach is an IngestError naming `name`."""
    worker = _take_worker(_context(fmt))
    reusable = False
    try:
        try:
            worker.conn.send((fmt, max_mb, work))
            if not worker.conn.poll(_IMPORT_TIMEOUT_S) or worker.conn.recv() != "ready":
                raise IngestError(name, "the parser did not start", "check the installation of `unstructured`")
            if not worker.conn.poll(timeout_s):
                raise IngestError(name, f"parsing and tokenizing took longer than {timeout_s:g} s (RAG_PARSE_TIMEOUT_S); "
                                        "the file is pathological or very large",
                                  "split the file, or raise RAG_PARSE_TIMEOUT_S if it is legitimate")
            kind, value, vm_after = worker.conn.recv()
            reusable = kind != "memory" and not worker.grew(vm_after, max_mb)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            # the worker died without a word: the kernel killed it (memory) or it crashed
            worker.proc.join(5)
            code = worker.proc.exitcode
            if code is not None and code < 0 and -code in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT):
                kind, value = "memory", None
            else:
                raise IngestError(name, f"the parser process exited unexpectedly (code {code})",
                                  "the file is corrupt; re-export it") from None
    finally:
        if reusable:
            _give_back(worker)
        else:
            worker.kill()
    if kind == "memory":
        raise IngestError(name, f"parsing and tokenizing needed more than {max_mb:g} MB (RAG_PARSE_MAX_MB)",
                          "the file is pathological or very large; split it, or raise RAG_PARSE_MAX_MB")
    if kind == "error":
        reason, fix = value
        raise IngestError(name, reason, fix)
    return value


def load_limited(path: Path, *, timeout_s: float, max_mb: float, label: str | None = None) -> ParsedDocument:
    """`load_document(path)` under a time and memory budget; a breach is an IngestError for this file.

    `label` is how the error names the file (an upload's own name, not the server's path).
    """
    doc, _ = _run_limited(label or str(path), FORMATS.get(path.suffix.lower(), ""),
                          partial(_prepare, str(path), None, max_mb / 4), timeout_s=timeout_s, max_mb=max_mb)
    return doc


def runs_in_worker(chunker) -> bool:
    """A chunker holding a bound method (the embedding model's embed_array) would drag the model
    into the child; plain functions and settings travel fine. A routing chunker runs there when every
    chunker it routes to does."""
    routes = getattr(chunker, "routes", None)
    if isinstance(routes, dict):
        return all(runs_in_worker(c) for c in routes.values())
    return not any(inspect.ismethod(v) for v in getattr(chunker, "__dict__", {}).values())


def prepare_limited(path: Path, chunker, *, timeout_s: float, max_mb: float,
                    label: str | None = None) -> tuple[ParsedDocument, list[Chunk]]:
    """Parse, chunk and BM25-tokenize `path` under the per-file budget: chunks carry their `terms`."""
    name, fmt = label or str(path), FORMATS.get(path.suffix.lower(), "")
    if runs_in_worker(chunker):
        return _run_limited(name, fmt, partial(_prepare, str(path), chunker, max_mb / 4),
                            timeout_s=timeout_s, max_mb=max_mb)
    doc, _ = _run_limited(name, fmt, partial(_prepare, str(path), None, max_mb / 4),
                          timeout_s=timeout_s, max_mb=max_mb)
    chunks = chunker.chunk(doc)
    return doc, _run_limited(name, "", partial(with_terms, chunks), timeout_s=timeout_s, max_mb=max_mb)
