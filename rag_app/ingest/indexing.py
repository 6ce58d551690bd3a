"""Ingest: files -> parsed documents -> chunks -> vectors -> the store, one outcome per file.

A bad file becomes an `error` outcome and the batch goes on; a file whose content hash is already
in the collection is `unchanged` and costs nothing; a changed file replaces its old chunks.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_app.text import sparse
from rag_app.chunking import Chunker
from rag_app.models import LocalEmbeddings
from rag_app.core import IngestError
from rag_app.ingest.loaders import load_document, no_chunks_error, supported
from rag_app.ingest.textdecode import guessed_note
from rag_app.store import CollectionInfo, SparseVector, StoredPoint, VectorStore
from rag_app.core import Chunk, ParsedDocument
from rag_app.core import EmbedUsage

log = logging.getLogger(__name__)
Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class FileOutcome:
    path: str
    status: str  # written | unchanged | skipped (not a document type we read; `error` says why) | error
    chunks: int = 0
    error: str | None = None
    doc_type: str | None = None  # statute | contract | other, as classified (or overridden) at ingest
    warning: str | None = None  # written, with a caveat (its text encoding was guessed)
    replaced: dict | None = None  # an upload that took the place of a document of its name: {doc_id, source}


@dataclass
class IngestReport:
    outcomes: list[FileOutcome] = field(default_factory=list)
    embed: EmbedUsage = field(default_factory=EmbedUsage)
    rescore: EmbedUsage | None = None  # ingest's embedding pass (rag_app/ingest/rescore_pass.py); None when not run
    collection: CollectionInfo | None = None
    embed_model: str | None = None

    @property
    def errors(self) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == "error"]


def expand_paths(paths: Iterable[Path]) -> tuple[list[Path], list[FileOutcome]]:
    """The files to ingest, and what is said of the rest: a missing path is an error; a file in a folder
    that is not a type we read is `skipped`, with why (hidden files and folders are passed over)."""
    files: list[Path] = []
    problems: list[FileOutcome] = []
    for p in paths:
        if p.is_dir():
            found, skipped = _folder_files(p)
            files.extend(found)
            problems.extend(skipped)
        elif p.is_file():
            files.append(p)
        else:
            problems.append(FileOutcome(str(p), "error", error=f"{p}: no such file or folder"))
    return files, problems


def _folder_files(folder: Path) -> tuple[list[Path], list[FileOutcome]]:
    """A folder's files of a type we read, in name order, and a `skipped` outcome for each other file
    (hidden files and folders are passed over)."""
    from rag_app.ingest.loaders import FORMATS

    files: list[Path] = []
    skipped: list[FileOutcome] = []
    for f in sorted(x for x in folder.rglob("*") if x.is_file()
                    and not any(part.startswith(".") for part in x.relative_to(folder).parts)):
        if supported(f):
            files.append(f)
        else:
            skipped.append(FileOutcome(str(f), "skipped", error=(
                f"{f}: not read: {f.suffix or 'no extension'} is not a document type we read "
                f"({' '.join(sorted(FORMATS))})")))
    return files, skipped


Prepare = Callable[[Path, Chunker], tuple[ParsedDocument, list[Chunk]]]


Unchanged = Callable[[Path], "FileOutcome | None"]


def unchanged_by_hash(stored: dict[str, tuple[str, int]], overrides: Sequence[tuple[str, str]] = ()) -> Unchanged:
    """A check run before parsing: a file whose bytes hash to the version the collection holds (and
    whose --doc-type override, if any, is the type it was chunked as) is `unchanged` without being
    parsed. Re-ingesting 46 unchanged files used to re-parse all of them. `stored`: doc_id ->
    (version "sha256:doc_type", chunk count), from stored_versions()."""
    import hashlib

    from rag_app.chunking import overridden_type
    from rag_app.ingest.loaders import doc_id_for

    def check(path: Path) -> FileOutcome | None:
        entry = stored.get(doc_id_for(path))
        if entry is None:
            return None
        version, count = entry
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None  # parsing reports it, one line, as for any unreadable file
        doc_type = version.rpartition(":")[2]
        forced = overridden_type(str(path.resolve()), overrides)
        if version != f"{digest}:{doc_type}" or (forced is not None and forced != doc_type):
            return None
        return FileOutcome(str(path.resolve()), "unchanged", count, doc_type=doc_type)
    return check


def stored_versions(store: VectorStore, collection: str) -> dict[str, tuple[str, int]]:
    """doc_id -> (stored version, chunk count) of every document in the collection."""
    out: dict[str, tuple[str, int]] = {}
    for p in store.all_payloads(collection):
        version, count = out.get(p["doc_id"], (p.get("content_hash", ""), 0))
        out[p["doc_id"]] = (version, count + 1)
    return out


def parse_and_chunk(files: list[Path], chunker: Chunker, progress: Progress | None = None,
                    load: Callable[[Path], ParsedDocument] = load_document, prepare: Prepare | None = None,
                    unchanged: Unchanged | None = None,
                    ) -> tuple[list[tuple[ParsedDocument, list[Chunk]]], list[FileOutcome]]:
    """`prepare` does a file's whole content-sized work at once (ingest/sandbox.prepare_limited: parse,
    chunk and BM25 terms in a bounded worker); without it, `load` then the chunker in this process.
    Returns the parsed files and the outcomes of the others: errors, and files `unchanged` (a check
    before parsing, unchanged_by_hash) found the collection already holds."""
    done, failed = [], []
    for i, path in enumerate(files, 1):
        try:
            same = unchanged(path) if unchanged is not None else None
            if same is not None:
                failed.append(same)
                if progress:
                    progress("parse", i, len(files))
                continue
            if prepare is not None:
                doc, chunks = prepare(path, chunker)
            else:
                doc = load(path)
                chunks = chunker.chunk(doc)
            if not chunks:
                raise no_chunks_error(str(path), doc)
            done.append((doc, chunks))
        except IngestError as e:
            failed.append(FileOutcome(str(path), "error", error=str(e)))
        except Exception as e:  # one broken document never aborts the batch
            log.exception("unexpected failure on %s", path)
            failed.append(FileOutcome(str(path), "error", error=f"{path}: unexpected {type(e).__name__}: {e}"))
        if progress:
            progress("parse", i, len(files))
    return done, failed


def check_collection(store: VectorStore, info: CollectionInfo,
                     embeddings: Callable[[], LocalEmbeddings]) -> LocalEmbeddings | None:
    """An existing collection fits this version: it was indexed with a BM25 tokenizer this version reads, and
    (a dense leg) with the model and dimension of the embedder `embeddings()` loads. Returns that embedder
    (None: no dense leg, nothing loaded); a mismatch raises StoreError / ModelMismatch, before any stage runs."""
    store.check_tokenizer(info, sparse.TOKENIZER_VERSION, sparse.READS)
    if not info.dense_enabled:
        return None
    emb = embeddings()
    store.check_model(info, emb.model_name, emb.dimension)
    return emb


def opened_collection(store: VectorStore, name: str, embeddings: Callable[[], LocalEmbeddings]) -> CollectionInfo:
    """The collection's description, after checking it has chunks and matches this version's BM25 tokenizer
    and the embedding model (a mismatch fails here, before any stage runs)."""
    info = store.info(name)
    if info is None:
        raise store.missing(name)
    if store.count(name) == 0:  # a store that lost its data answers nothing
        raise store.emptied(name)
    check_collection(store, info, embeddings)
    return info


def decide_collection(name: str, chunker: Chunker, embeddings: LocalEmbeddings, chunks: list[Chunk],
                      max_unk_rate: float) -> CollectionInfo:
    sampled = chunks[:: max(1, len(chunks) // 300)]
    sample = [c.indexed_text() for c in sampled]
    unk = embeddings.unknown_token_rate(sample)
    dense = unk <= max_unk_rate
    reason = None
    if not dense:
        reason = (f"{embeddings.model_name} maps {unk:.0%} of this corpus's wordpieces to [UNK] "
                  f"(limit {max_unk_rate:.0%}); dense leg dropped, retrieval uses BM25")
        log.warning(reason)
    return CollectionInfo(name=name, embed_model=embeddings.model_name, dimension=embeddings.dimension,
                          dense_enabled=dense, unk_rate=round(unk, 4), avgdl=round(_mean_terms(sampled), 2),
                          chunker=f"{chunker.name}@{chunker.version}", dense_disabled_reason=reason,
                          sparse_tokenizer=sparse.TOKENIZER_VERSION)


def _terms(chunk: Chunk, text: str) -> sparse.TermCounts:
    return chunk.terms if chunk.terms is not None else sparse.term_counts(text)


def _mean_terms(chunks: list[Chunk]) -> float:
    """avgdl from the terms the worker counted (re-tokenizing 300 chunks of never-seen text here
    would cost minutes outside the budget)."""
    return (sum(_terms(c, c.indexed_text()).length for c in chunks) / len(chunks)) if chunks else 100.0


class _Points(Sequence):
    """A document's points, built a batch at a time as the store upserts them: the ~30k chunks of a
    20 MB upload as StoredPoints (payload dicts, sparse weights as Python floats) held ~1 GB at once."""

    def __init__(self, chunks: list[Chunk], texts: list[str], content_hash: str, avgdl: float, dense):
        self.chunks, self.texts, self.content_hash, self.avgdl, self.dense = chunks, texts, content_hash, avgdl, dense

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._point(j) for j in range(*i.indices(len(self)))]
        return self._point(range(len(self))[i])

    def _point(self, j: int) -> StoredPoint:
        chunk = self.chunks[j]
        return StoredPoint(chunk.chunk_id, {**chunk.payload(), "content_hash": self.content_hash},
                           SparseVector(*sparse.weigh(_terms(chunk, self.texts[j]), self.avgdl)),
                           None if self.dense is None else self.dense[j].tolist())


def index_documents(store: VectorStore, info: CollectionInfo, parsed, embeddings: LocalEmbeddings | None,
                    progress: Progress | None = None) -> tuple[list[FileOutcome], EmbedUsage]:
    outcomes, total = [], EmbedUsage()
    for i, (doc, chunks) in enumerate(parsed, 1):
        # the stored version names the content and the type it was chunked as: a --doc-type override
        # (or a classification that changed) re-chunks an unchanged file
        version = f"{doc.content_hash}:{chunks[0].doc_type}"
        if store.document_hash(info.name, doc.doc_id) == version:
            outcomes.append(FileOutcome(doc.source_path, "unchanged", len(chunks), doc_type=chunks[0].doc_type))
        else:
            texts = [c.indexed_text() for c in chunks]
            dense = None
            if info.dense_enabled and embeddings is not None:
                dense, used = embeddings.embed_array_with_stats(texts)
                total += used
            points = _Points(chunks, texts, version, info.avgdl, dense)
            store.replace_document(info.name, doc.doc_id, version, points)
            outcomes.append(FileOutcome(doc.source_path, "written", len(chunks), doc_type=chunks[0].doc_type,
                                        warning=guessed_note(doc.encoding)))
        if progress:
            progress("index", i, len(parsed))
    if any(o.status == "written" for o in outcomes):
        store.commit(info.name)  # durable, and the engine's indexes built before the first query
    return outcomes, total
