"""Prepare one file in a worker process that can be stopped: bounded seconds and megabytes per file.

A hostile file (a DOCX of a million empty paragraphs, a zip bomb, deeply nested HTML, megabytes of
never-seen Chinese that jieba's HMM crawls through at ~10k chars/s) must cost a bounded amount and
become that file's error; the batch goes on. Parser libraries and jieba cannot be interrupted from
a thread, so all of a file's work that grows with its content (parse, chunk, BM25 tokenization)
runs in a child process forked from a forkserver:

    parent                                  child
    ------                                  -----
    start child  ------------------------>  import the parser for this format, load jieba's dictionary
                 <------------------------  "ready"   (then RLIMIT_AS = its size + RAG_PARSE_MAX_MB)
    wait RAG_PARSE_TIMEOUT_S                load_document(path) -> chunker.chunk -> sparse.term_counts
                 <------------------------  (ParsedDocument, chunks with their terms) or the IngestError
    kill it if the time is up

The memory budget is on top of what the imported parser already maps, so the limit means "what
this file may add", the same on every machine. What stays in the server per chunk is cheap: BM25
weights from the counted terms (`sparse.weigh`) and, when the dense leg is on, the embedding model.
A chunker that calls the embedding model (semantic backend "embedding", semantic-window) cannot go
to the child; then the file is parsed in one child, chunked in the server and tokenized in another.
"""
from __future__ import annotations

import inspect
import multiprocessing
import resource
import signal
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from rag_app import sparse
from rag_app.errors import IngestError
from rag_app.ingest.loaders import FORMATS, load_document
from rag_app.types import Chunk, ParsedDocument

_IMPORT_TIMEOUT_S = 300  # importing unstructured's PDF stack can take a minute on a cold, busy machine


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def with_terms(chunks: list[Chunk]) -> list[Chunk]:
    return [replace(c, terms=sparse.term_counts(c.indexed_text())) for c in chunks]


def _prepare(path: str, chunker, max_uncompressed_mb: float) -> tuple[ParsedDocument, list[Chunk] | None]:
    doc = load_document(Path(path), max_uncompressed_mb=max_uncompressed_mb)
    return doc, None if chunker is None else with_terms(chunker.chunk(doc))


def _child(conn, fmt: str, max_mb: float, work: Callable[[], object]) -> None:
    budget, peak_before = int(max_mb * 1024 * 1024), 0
    try:
        from rag_app.ingest.loaders import import_parser

        import_parser(fmt)
        sparse.warm()  # the tokenizer's dictionary is not the file's cost: loaded before the limit
        limit = _vm_size_bytes() + budget
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        peak_before = _peak_rss_bytes()
        conn.send("ready")
        conn.send(("ok", work()))
    except MemoryError:
        conn.send(("memory", None))
    except IngestError as e:
        # libxml2 reports a failed malloc as "XMLSyntaxError: unknown error": a parse that grew to
        # most of its budget and then failed ran out of memory, whatever the library called it.
        ran_out = _peak_rss_bytes() - peak_before > 0.6 * budget
        conn.send(("memory", None) if ran_out else ("error", (e.reason, e.fix)))
    except BaseException as e:  # noqa: BLE001 - anything a parser raises becomes this file's error
        conn.send(("error", (f"cannot parse ({type(e).__name__}: {str(e)[:300]})",
                             "the file is corrupt or not what its extension says; re-export it")))
    finally:
        conn.close()


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
    """`work()` in a child under the time and memory budget; a breach is an IngestError naming `name`."""
    ctx = _context(fmt)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fmt, max_mb, work), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(_IMPORT_TIMEOUT_S) or parent.recv() != "ready":
            raise IngestError(name, "the parser did not start", "check the installation of `unstructured`")
        if not parent.poll(timeout_s):
            raise IngestError(name, f"parsing and tokenizing took longer than {timeout_s:g} s (RAG_PARSE_TIMEOUT_S); "
                                    "the file is pathological or very large",
                              "split the file, or raise RAG_PARSE_TIMEOUT_S if it is legitimate")
        kind, value = parent.recv()
    except EOFError:  # the child died without a word: the kernel killed it (memory) or it crashed
        proc.join(5)
        code = proc.exitcode
        if code is not None and code < 0 and -code in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT):
            kind, value = "memory", None
        else:
            raise IngestError(name, f"the parser process exited unexpectedly (code {code})",
                              "the file is corrupt; re-export it") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
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
