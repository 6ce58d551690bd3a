"""Doc examples as tests: every command in README.md and docs/*.md either runs here or is checked.

- Every fenced ```bash block is run, in document order (README first), by bash in one temporary
  working directory holding `my-laws/` (three real laws from tests/fixtures/laws), with `rag` on the
  PATH as this checkout's CLI and no RAG_* / OPENAI_* settings inherited. A block may be preceded by an
  HTML comment (invisible when rendered) that changes how it runs:
    <!-- doc-test: flags — why -->   not run (it needs the full shared data, other software or minutes
                                     of CPU; the comment says which): only checked, as below
    <!-- doc-test: serve — ... -->   `rag serve &` is started on a free port (the block's 8000 is
                                     replaced by it); the rest runs once /healthz answers
    <!-- doc-test: llm — ... -->     the block's https://api.deepseek.com/v1 is replaced by the local
                                     OpenAI-compatible fake (tests/fakes/openai_server.py)
- Every command, run or not, in bash and text blocks and in inline `code` spans, is checked: a `rag`
  command's subcommand and every --flag it uses must exist (read from the CLI's own click tree, what
  `rag SUB --help` prints); a `python bench/X.py` script must exist and define each --flag it is given
  (its argparse add_argument calls, what its --help prints, read without importing its heavy modules);
  a pytest path must exist and its -m marker be registered; a `make` target must be in the Makefile.
"""
from __future__ import annotations

import ast
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CORPUS, HANG_S, HEAVY_HANG_S, LAWS, LEGAL_ZH, REPO, wait_until
from tests.fakes.openai_server import FakeOpenAI, Reply

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MODES = {"run", "flags", "serve", "llm"}
# Rows of the README's documentation table whose file another branch is writing (merged later).
PENDING_DOCS = {"docs/spend-control.md"}
FAKE_ENDPOINT = "https://api.deepseek.com/v1"
DOC_PORT = "8000"


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    mode: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    out, lines = [], doc.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while lines[j].strip() != "```":
            j += 1
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = re.match(r"<!--\s*doc-test:\s*(\w+)", prev)
        out.append(Block(doc, i + 1, m.group(1), marker.group(1) if marker else "run", "\n".join(lines[i + 1:j])))
        i = j + 1
    return out


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a shell text: continuations joined, comments dropped, split at ; && | &."""
    joined = re.sub(r"\\\n", " ", text)
    cmds = []
    for line in joined.split("\n"):
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote: not a shell line
            continue
        cmd: list[str] = []
        for t in tokens + [";"]:
            if t in (";", "&&", "||", "|", "&"):
                if cmd:
                    cmds.append(cmd)
                cmd = []
            else:
                cmd.append(t.rstrip(";&") if t.endswith(("&", ";")) and len(t) > 1 else t)
    return cmds


def inline_commands(doc: Path) -> list[str]:
    """Inline `code` spans outside fenced blocks that read as one of our commands."""
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
    spans = re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", text)
    return [s for s in spans if _ours(_strip_prefix(_split(s)))]


def _split(s: str) -> list[str]:
    try:
        return shlex.split(s.replace("\n", " "), comments=True)
    except ValueError:
        return s.split()


def _strip_prefix(tokens: list[str]) -> list[str]:
    """Drop what runs before the program: VAR=value assignments, `nice -n N`, `/usr/bin/time`."""
    t = list(tokens)
    while t:
        if re.match(r"^[A-Z_][A-Z0-9_]*=", t[0]):
            t = t[1:]
        elif t[0] == "nice" and len(t) > 2 and t[1] == "-n":
            t = t[3:]
        elif t[0] in ("/usr/bin/time", "time", "nice"):
            t = t[1:]
        else:
            break
    return t


def _ours(t: list[str]) -> bool:
    if not t:
        return False
    prog = Path(t[0]).name
    if prog == "rag":
        return True
    if prog in ("python", "python3") and len(t) > 1:
        return t[1].startswith("bench/") or (t[1] == "-m" and len(t) > 2 and t[2].split(".")[0] in ("bench", "pytest"))
    return prog in ("pytest", "make")


def _flags(tokens: list[str]) -> list[str]:
    """--flags a command line uses; synopsis brackets like [--k 1,5,10] are read as the flag."""
    out = []
    for t in tokens:
        t = t.lstrip("[(").rstrip("])")
        m = re.match(r"^(--[a-z][a-z0-9-]*)", t)
        if m:
            out.append(m.group(1))
    return out


def _rag_tree():  # typer's click tree (typer vendors its own click: groups are known by `.commands`)
    import typer

    from rag_app.cli.main import app

    return typer.main.get_command(app)


def check_command(tokens: list[str]) -> list[str]:
    """Problems with one command line ([] when it and every flag it uses exist); not ours -> []."""
    t = _strip_prefix(tokens)
    if not _ours(t):
        return []
    prog = Path(t[0]).name
    if prog == "rag":
        cmd, rest = _rag_tree(), t[1:]
        path = ["rag"]
        while hasattr(cmd, "commands") and rest and not rest[0].startswith("-"):
            name = rest[0].lstrip("[").rstrip("]")
            sub = cmd.commands.get(name)
            if sub is None:
                return [f"`{' '.join(path)} {name}`: no such command (has {', '.join(sorted(cmd.commands))})"]
            cmd, rest, path = sub, rest[1:], path + [name]
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        return [f"`{' '.join(path)}` has no option {f}" for f in _flags(rest) if f not in known]
    if prog in ("python", "python3") and t[1].startswith("bench/"):
        script = REPO / t[1]
        if not script.exists():
            return [f"{t[1]} does not exist"]
        known = _argparse_flags(script) | {"--help"}
        return [f"{t[1]} has no option {f}" for f in _flags(t[2:]) if f not in known]
    if prog in ("python", "python3") and t[1] == "-m" and t[2].startswith("bench."):
        script = REPO / (t[2].replace(".", "/") + ".py")
        if not script.exists():
            return [f"module {t[2]} does not exist"]
        known = _argparse_flags(script) | {"--help"}
        return [f"{t[2]} has no option {f}" for f in _flags(t[3:]) if f not in known]
    if prog == "pytest" or t[1:3] == ["-m", "pytest"]:
        args = t[1:] if prog == "pytest" else t[3:]
        problems = [f"{a} does not exist" for a in args if a.startswith("tests/") and not (REPO / a.split("::")[0]).exists()]
        registered = _markers()
        for flag, value in itertools.pairwise(args):
            if flag == "-m":
                problems += [f"marker {w} is not registered" for w in re.findall(r"[a-z_]+", value)
                             if w not in ("not", "and", "or") and w not in registered]
        return problems
    if prog == "make":
        targets = set(re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), flags=re.MULTILINE))
        return [f"make has no target {a}" for a in t[1:] if "=" not in a and not a.startswith("-") and a not in targets]
    return []


def _argparse_flags(script: Path) -> set[str]:
    """The script's add_argument flags, and those of the bench modules it imports from (bench/common.py's
    cv_arguments gives the cross-validation benches their shared ones)."""
    flags = set()
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench.") and script.stem != "common":
            flags |= _argparse_flags(REPO / (node.module.replace(".", "/") + ".py"))
    return flags


def _markers() -> set[str]:
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {m.split(":")[0].strip() for m in cfg.get("markers", [])}


def all_command_lines() -> list[tuple[str, list[str]]]:
    out = []
    for doc in DOCS:
        for b in blocks(doc):
            if b.lang in ("bash", "text", ""):
                out += [(b.id, c) for c in shell_commands(b.text)]
        out += [(f"{doc.relative_to(REPO)} inline", _split(s)) for s in inline_commands(doc)]
    return out


# ---------------------------------------------------------------- what every document must hold

def test_readme_is_a_quickstart_of_at_most_150_lines_with_pictures_of_the_product():
    """A quickstart that shows the dashboard home, a query page and an experiment page (taken by the browser
    tests, `make screenshots`); release notes live in CHANGELOG.md, not here."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    shown = re.findall(r"!\[[^\]]*\]\((docs/images/[\w-]+\.png)\)", text)
    assert shown == [f"docs/images/{n}" for n in ("dashboard-home.png", "query-page.png", "experiment-page.png")]
    assert all((REPO / s).stat().st_size > 30_000 for s in shown)
    assert not re.search(r"^#+ .*(What changed|Since \d|Since then)", text, flags=re.MULTILINE)


@pytest.mark.parametrize("doc", DOCS + [REPO / "CHANGELOG.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_no_machine_paths_or_internal_issue_references(doc):
    text = doc.read_text(encoding="utf-8")
    assert not re.findall(r"/work/|/tmp/|/home/\w+", text), "a path of one machine"
    assert not re.findall(r"\bissues? #?\d+|(?<![\w&/])#\d+\b", text, flags=re.IGNORECASE), "an internal issue reference"


def test_readme_links_resolve():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert {"docs/operations.md", "docs/costs-and-prices.md", "docs/evaluation-and-levers.md",
            "docs/storage-and-scaling.md", "docs/measurements.md", "CHANGELOG.md"} <= set(links)
    missing = [link for link in links if not link.startswith("http") and not (REPO / link).exists()
               and link not in PENDING_DOCS]
    assert not missing


def test_every_repository_path_named_exists():
    """A file the docs point a reader to is there (a module may be named without its .py); outputs a
    documented command writes (bench/out/...) are not expected in a checkout."""
    named = set()
    for doc in DOCS + [REPO / "CHANGELOG.md"]:
        named |= set(re.findall(r"\b((?:rag_app|tracing|chains|bench|tests|prompts|notebooks)/[\w./-]*\w)",
                                doc.read_text(encoding="utf-8")))
    missing = sorted(p for p in named if not p.startswith("bench/out/")
                     and not (REPO / p).exists() and not (REPO / f"{p}.py").exists())
    assert not missing


def test_every_block_has_a_known_mode_and_a_bash_block_that_is_not_run_says_why():
    for doc in DOCS:
        for b in blocks(doc):
            assert b.mode in MODES, f"{b.id}: unknown doc-test mode {b.mode}"
            if b.mode != "run":
                assert b.lang == "bash", f"{b.id}: a doc-test marker on a {b.lang or 'plain'} block"
    reasons = re.findall(r"<!--\s*doc-test:\s*flags\s*(.*?)-->", "".join(d.read_text(encoding="utf-8") for d in DOCS))
    assert reasons and all(len(r.strip(" —-")) > 10 for r in reasons)


# ---------------------------------------------------------------- every command exists, with its flags

def test_the_check_catches_a_missing_command_flag_script_target_and_marker():
    assert check_command(["rag", "ask", "q", "--json", "--doc", "x"]) == []
    assert check_command(["rag", "ask", "q", "--no-such-flag"]) == ["`rag ask` has no option --no-such-flag"]
    assert "no such command" in check_command(["rag", "frobnicate"])[0]
    assert check_command(["rag", "experiment", "compare", "topn", "--json"]) == []
    assert check_command(["rag", "experiment", "compare", "topn", "--bogus"]) == ["`rag experiment compare` has no option --bogus"]
    assert check_command(["python", "bench/ledger_volume.py", "--queries", "5"]) == []
    assert check_command(["python", "bench/ledger_volume.py", "--rows", "5"]) == ["bench/ledger_volume.py has no option --rows"]
    assert check_command(["python", "bench/nope.py"]) == ["bench/nope.py does not exist"]
    # a flag the bench takes from bench/common.py's shared arguments counts; one nobody defines does not
    assert check_command(["python", "bench/adapter_cv.py", "--folds", "5", "--l2", "0.01"]) == []
    assert check_command(["python", "bench/adapter_cv.py", "--pool-depth", "5"]) == [
        "bench/adapter_cv.py has no option --pool-depth"]
    assert check_command(["make", "demo"]) == [] and check_command(["make", "deploy"]) == ["make has no target deploy"]
    assert check_command(["pytest", "-m", "nosuchmarker", "tests/nope.py"]) == [
        "tests/nope.py does not exist", "marker nosuchmarker is not registered"]
    assert check_command(["curl", "-s", "--whatever"]) == []  # not ours: not checked


def test_every_documented_command_and_flag_exists():
    lines = all_command_lines()
    checked = [(where, c) for where, c in lines if _ours(_strip_prefix(c))]
    assert len(checked) > 60  # the README and docs name dozens of commands: the extraction found them
    problems = [f"{where}: {p}" for where, c in checked for p in check_command(c)]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the runnable blocks run

RUNNABLE = [b for doc in DOCS for b in blocks(doc) if b.lang == "bash" and b.mode != "flags"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The working directory every block runs in, in order (the docs' examples read the ledger the README's
    quickstart wrote), and the bash environment."""
    root = tmp_path_factory.mktemp("doc_examples")
    shim = root / "bin"
    shim.mkdir()
    (shim / "rag").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rag_app.cli.main "$@"\n')
    (shim / "rag").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    # The packaged MiniLM is forced so the outcome never depends on which models this machine has
    # cached (the README's offline warnings are about exactly this fallback).
    env.update({"PATH": f"{shim}:{env.get('PATH', '')}", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
                "RAG_EMBED_MODEL": "sentence-transformers/all-MiniLM-L6-v2", "PYTHONUNBUFFERED": "1",
                "TOKENIZERS_PARALLELISM": "false", "COLUMNS": "80"})
    work = root / "work"
    shutil.copytree(LAWS, work / "my-laws")
    return work, env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          check=False, text=True, timeout=HANG_S)


def _ok(proc: subprocess.CompletedProcess, block: Block) -> None:
    assert proc.returncode == 0, f"{block.id} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_the_block_runs(block, workdir):
    cwd, env = workdir
    if block.mode == "run":
        proc = _bash(block.text, cwd, env)
        _ok(proc, block)
        if "rag ask" in block.text and "answer.json" in block.text:
            answer = json.loads((cwd / "answer.json").read_text(encoding="utf-8"))
            assert answer["citations"] and answer["mode"] == "extractive"
        if "rag prices check" in block.text:
            assert json.loads((cwd / "price.json").read_text(encoding="utf-8"))["model"] == "deepseek-v4-flash"
    elif block.mode == "serve":
        port = str(_free_port())
        text = block.text.replace(DOC_PORT, port)
        serve_line = next(line for line in text.splitlines() if line.strip().startswith("rag serve"))
        assert serve_line.rstrip().endswith("&"), "the serve block starts the server in the background"
        args = shlex.split(serve_line.rstrip().rstrip("&")) + ["--port", port]
        server = subprocess.Popen([env["PATH"].split(":")[0] + "/rag", *args[1:]], cwd=cwd, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def up() -> bool:
                try:
                    return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).status == 200
                except OSError:
                    return False
            wait_until(up, "rag serve answering /healthz", alive=lambda: server.poll() is None)
            rest = "\n".join(line for line in text.splitlines() if line != serve_line)
            proc = _bash(rest, cwd, env)
            _ok(proc, block)
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard", timeout=30)
            assert page.status == 200 and "<html" in page.read().decode("utf-8").lower()
        finally:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=HANG_S)
        answer = json.loads((cwd / "http_answer.json").read_text(encoding="utf-8"))
        assert answer["answer"] and answer["citations"]
    elif block.mode == "llm":
        assert FAKE_ENDPOINT in block.text
        with FakeOpenAI() as fake:
            fake.script = [Reply(content="依据《中华人民共和国劳动法》第二十五条[1]，可以解除。", prompt_tokens=900,
                                 completion_tokens=40)]
            proc = _bash(block.text.replace(FAKE_ENDPOINT, fake.base_url), cwd, env)
        _ok(proc, block)
        assert len(fake.requests) == 1 and fake.requests[0]["body"]["model"] == "deepseek-v4-flash"
        assert "第二十五条" in proc.stdout and "deepseek-v4-flash" in proc.stdout


# ---------------------------------------------------------------- the README's `make demo`, for real

@pytest.mark.shared_data
@pytest.mark.heavy
@pytest.mark.timeout(HEAVY_HANG_S)
def test_make_demo_runs_the_main_job_on_the_shared_data(tmp_path):
    """What `make demo` runs (its recipe read from the Makefile; the install step is the venv this test
    runs in), on the shared corpus, in a fresh directory: the README's figures hold (46 files, 3,794
    chunks, three answers with cost tables)."""
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo: install\n(?:\t@.*\n)*\t(.+)$", makefile, flags=re.MULTILINE).group(1)
    assert recipe == "$(BIN)/rag demo --corpus $(CORPUS) --qa $(QA)"
    assert "CORPUS ?= $(if $(HAVE_SHARED),$(SHARED)/data/legal_zh/corpus," in makefile
    assert "QA ?= $(if $(HAVE_SHARED),$(SHARED)/data/legal_zh/qa_dev.jsonl," in makefile
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_", "QDRANT_"))}
    env.update({"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "COLUMNS": "80"})
    proc = subprocess.run([sys.executable, "-m", "rag_app.cli.main", "demo", "--corpus", str(CORPUS),
                           "--qa", str(LEGAL_ZH / "qa_dev.jsonl")], cwd=tmp_path, env=env, capture_output=True,
                          check=False, text=True, timeout=HEAVY_HANG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "46 written, 0 unchanged, 0 failed" in " ".join(proc.stdout.split())
    assert sum(int(n) for n in re.findall(r"^written\s+(\d+) chunks", proc.stdout, flags=re.MULTILINE)) == 3794
    assert proc.stdout.count("cost of query") == 3 and (tmp_path / ".rag" / "ledger.sqlite").exists()
    # the models' loading is booked apart (as `rag ask` does), said once, under the first answer
    assert proc.stdout.count("loading models, booked apart") == 1
