"""A labelled set of answers, faithful and not, built from the real corpus and the real answer prompt:
what the groundedness score is measured against (bench/quality_detector.py, tests/unit/quality/test_quality_set.py).

How one answer is made (the way an outside check scripts an LLM):
1. a question of the corpus's own set (legal_zh/qa_dev.jsonl, legal_en/qa_dev.jsonl), its gold passage
   cut by the product's chunker from the real document, and four other passages of the question's own
   document and two others, chosen by word overlap with the question (what retrieval sends beside it);
2. the real prompt (prompts/answer/v1.md) is rendered over them, exactly as the product renders it;
3. a scripted writer reads that prompt back (the numbered passages and their labels, nothing else) and
   writes an answer of one kind: a quote, a paraphrase, a refusal, an invented claim, a flipped modal ...

Kinds and labels (faithful = the answer says only what its passages say):
    Chinese  quote, light_paraphrase, heavy_paraphrase, refusal, two_passages        faithful
             true_plus_invented, invented, flipped_modal, flipped_negation,
             changed_number, invented_article, wrong_passage                          unfaithful
    English  en_quote, en_paraphrase, en_refusal                                      faithful
             en_invented, en_mixed, en_flipped_modal                                  unfaithful

The writers' word lists (paraphrase synonyms, modal flips, invented predicates taken from documents that
were not sent) are their own: the detector (rag_app/quality/) shares none of them, so the set measures
it rather than echoing it. Nothing from the corpus is stored in the repository: bench/quality_set.jsonl
holds only which question, kind and seed each answer is; build_set() rebuilds the answers from it and the
corpus (RAG_SHARED_DIR, default ../shared) deterministically.

    PYTHONPATH=$PWD python bench/quality_set.py            # rebuild and print counts per kind
    PYTHONPATH=$PWD python bench/quality_set.py --choose   # choose the questions again (rewrites the manifest)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bench.common import SHARED
from prompts import load_prompt
from rag_app.text.legal_numbers import ARTICLE_REF, cn_to_int, find_article_refs, int_to_cn

MANIFEST = Path(__file__).with_name("quality_set.jsonl")
KINDS_ZH = {"quote": True, "light_paraphrase": True, "heavy_paraphrase": True, "refusal": True, "two_passages": True,
            "true_plus_invented": False, "invented": False, "flipped_modal": False, "flipped_negation": False,
            "changed_number": False, "invented_article": False, "wrong_passage": False}
KINDS_EN = {"en_quote": True, "en_paraphrase": True, "en_refusal": True, "en_invented": False, "en_mixed": False,
            "en_flipped_modal": False}
FAITHFUL = {**KINDS_ZH, **KINDS_EN}
QUESTIONS = {"zh": 44, "en": 32}
N_PASSAGES = 5


@dataclass(frozen=True)
class Case:
    case_id: str
    lang: str
    kind: str
    faithful: bool
    question: str
    answer: str
    passages: tuple[str, ...]
    labels: tuple[str, ...]


# -- the passages a question is sent, by the product's own chunker --------------------------------------------
@lru_cache(maxsize=1)
def _chunker():
    from rag_app.chunking.registry import build_chunker
    from rag_app.config.settings import Settings

    return build_chunker("legal", Settings(_env_file=None, data_dir=Path("/nonexistent")))


@lru_cache(maxsize=256)
def _chunks(path: str) -> tuple:
    from rag_app.ingest.loaders import load_document

    return tuple(_chunker().chunk(load_document(Path(path))))


def _grams(text: str, lang: str) -> set[str]:
    if lang == "zh":
        flat = re.sub(r"[^\u4e00-\u9fff]", "", text)
        return {flat[i:i + 2] for i in range(len(flat) - 1)}
    return set(re.findall(r"[a-z]{4,}", text.lower()))


def _rng(*parts) -> random.Random:
    return random.Random("|".join(str(p) for p in parts))


def _sha(s: str) -> str:
    return hashlib.sha1(s.encode()).hexdigest()


def passages_for(q: dict, lang: str, shared: Path) -> list:
    """The ScoredChunks sent with question `q`: its gold chunk among four others by word overlap."""
    from rag_app.core.types import ScoredChunk

    corpus = shared / "data" / f"legal_{lang}" / "corpus"
    gold = q["gold"][0]
    chunks = _chunks(str(corpus / gold["doc"]))
    hit = [c for c in chunks if c.char_start <= gold["char_start"] < c.char_end]
    if not hit:
        return []
    docs = sorted((p for p in corpus.rglob("*") if p.is_file() and p.suffix in (".md", ".txt")),
                  key=lambda p: _sha(q["id"] + p.name))
    others = [d for d in docs if d.name != Path(gold["doc"]).name][:2]
    pool = [c for c in chunks if c is not hit[0]] + [c for d in others for c in _chunks(str(d))]
    want = _grams(q["question"], lang)
    ranked = sorted(pool, key=lambda c: (-len(want & _grams(c.text, lang)), c.char_start))[:N_PASSAGES - 1]
    rng = _rng(q["id"], "order")
    at = rng.choice([0, 0, 0, 1, 2, 3, 4])
    picked = ranked[:at] + [hit[0]] + ranked[at:]
    return [ScoredChunk(c, 1.0 - i / 10, i + 1) for i, c in enumerate(picked)]


def render_prompt(question: str, contexts: list) -> str:
    """The user message the product sends (prompts/answer/v1.md over format_context)."""
    from rag_app.query.answer import format_context

    messages = load_prompt("answer", "v1").format_messages(context=format_context(contexts), question=question)
    return str(messages[-1].content)


_BLOCK = re.compile(r"^\[(\d+)\] (.*)$", re.M)


def read_prompt(prompt: str) -> list[tuple[str, str]]:
    """(label, text) of each numbered passage, read back from the rendered prompt as a model would."""
    body = prompt.split("问题 / Question:")[0]
    starts = [m for m in _BLOCK.finditer(body)]
    out, expect = [], 1
    marks = []
    for m in starts:  # a passage's own text may hold "[n] ..." lines: take the numbers in order
        if int(m.group(1)) == expect:
            marks.append(m)
            expect += 1
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out.append((m.group(2).strip(), body[m.end():end].strip()))
    return out


# -- Chinese writers ---------------------------------------------------------------------------------------------
_ZH_HEAD = re.compile(r"^\s*第[零〇一二两三四五六七八九十百千\d]+条(?:之[一二三四五六七八九十]+)?\s*")
_ZH_ART_LINE = re.compile(r"(?m)^第[零〇一二两三四五六七八九十百千\d]+条(?:之[一二三四五六七八九十]+)?")
ZH_MODALS = {"不得": "可以", "禁止": "允许", "应当": "可以不", "必须": "可以不", "有权": "无权", "无权": "有权", "可以": "不得"}
ZH_NEG_DROP = {"不予": "予以", "不属于": "属于", "不适用": "适用", "不承担": "承担", "不受": "受", "未经": "经", "不能": "能",
               "没有": "有", "不再": "再", "不视为": "视为", "不影响": "影响", "不计入": "计入", "不包括": "包括", "无效": "有效"}
ZH_NEG_ADD = {"适用": "不适用", "属于": "不属于", "承担": "不承担", "包括": "不包括", "视为": "不视为", "影响": "不影响",
              "有效": "无效", "予以": "不予", "享有": "不享有", "具有": "不具有", "提供": "不提供", "支付": "不支付"}
ZH_LIGHT = {"是指": "指的是", "依照": "按照", "或者": "或", "以及": "和", "应当": "应", "的规定": "规定", "本法": "该法",
            "并且": "并", "但是": "但", "之日起": "起", "予以": "给予", "其他": "其它"}
ZH_HEAVY = {"人民法院": "法院", "有关": "相关", "依法": "依照法律", "设立": "成立", "撤销": "取消", "申请": "提出申请",
            "职工": "员工", "用人单位": "单位", "劳动者": "员工", "终止": "结束", "及时": "尽快", "立即": "马上",
            "应当": "必须", "不得": "不能", "可以": "能够", "即": "也就是", "时": "的时候", "规定的": "所规定的",
            "国务院": "中央政府", "组织": "机构", "公民": "个人", "合法权益": "正当权益", "行使": "使用", "依照": "根据"}
ZH_CONNECT = ("也就是说，", "简单来说，", "换言之，", "具体而言，", "")
ZH_REFUSALS = ("根据检索到的条文无法确定。", "根据检索到的条文无法确定{topic}。", "检索到的法条片段未涉及该问题，无法确定。",
               "所提供的条文中没有关于这一问题的规定，因此无法回答。", "现有条文不足以回答该问题。", "抱歉，根据提供的片段无法判断{topic}。")
_ZH_NUM = re.compile(r"(?<!第)(百分之)?([一二三四五六七八九十百千万两]+|\d+)(个工作日|日|年|个月|倍|人|元|万元|周岁|小时|天|%)")


def zh_sentences(text: str) -> list[tuple[str, int]]:
    """(sentence, its offset) of a passage: whole sentences ending 。 or ；, 10-120 characters."""
    out = []
    for m in re.finditer(r"[^。；\n]+[。；]", text):
        s = _ZH_HEAD.sub("", m.group(0)).strip()
        if 10 <= len(s) <= 120 and not s.startswith(("（", "(")):
            out.append((s[:-1] + "。", m.start()))
    return out


def zh_article(label: str, text: str, at: int) -> str | None:
    heads = [m.group(0) for m in _ZH_ART_LINE.finditer(text[:at + 1])]
    if heads:
        return heads[-1]
    refs = ARTICLE_REF.findall(label)
    m = ARTICLE_REF.search(label)
    return m.group(0) if refs and m else None


def zh_title(label: str, rng: random.Random) -> str:
    m = re.search(r"《([^》]+)》", label)
    title = m.group(1) if m else label
    return title.removeprefix("中华人民共和国") if rng.random() < 0.4 else title


def zh_frame(s: str, n: int, title: str, article: str | None, rng: random.Random, bare_ok: bool = True) -> str:
    """The sentence as an answer cites it: one of five ways a model writes the citation."""
    body = s.rstrip("。")
    forms = [0, 1, 2, 3] + ([4] if bare_ok else [])
    if article is None:
        forms = [4, 5]
    form = rng.choice(forms)
    if form == 0:
        return f"根据《{title}》{article}[{n}]，{body}。"
    if form == 1:
        return f"依据《{title}》{article}的规定，{body}[{n}]。"
    if form == 2:
        return f"{body}（《{title}》{article}[{n}]）。"
    if form == 3:
        return f"《{title}》{article}规定：{body}。[{n}]"
    if form == 4:
        return f"{body}[{n}]。"
    return f"根据《{title}》[{n}]，{body}。"


def zh_light(s: str, rng: random.Random) -> str:
    out = s
    for a, b in ZH_LIGHT.items():
        if a in out and rng.random() < 0.6:
            out = out.replace(a, b, 1)
    return out


def zh_heavy(s: str, rng: random.Random) -> str:
    out = zh_light(s, rng)
    for a, b in ZH_HEAVY.items():
        if a in out and rng.random() < 0.8:
            out = out.replace(a, b)
    out = re.sub(r"（[^）]*）", "", out)
    clauses = out.rstrip("。").split("，")
    if len(clauses) >= 2 and clauses[0].endswith("的"):  # a condition: X的，Y -> 如果X，那么Y
        clauses[0] = "如果" + clauses[0][:-1]
        clauses[1] = "那么" + clauses[1]
    elif len(clauses) >= 3 and rng.random() < 0.5:  # two middle clauses swap places
        clauses[1], clauses[2] = clauses[2], clauses[1]
    out = "，".join(clauses) + "。"
    if rng.random() < 0.5:
        out = out.replace("的", "", 1)
    return rng.choice(ZH_CONNECT) + out


def zh_flip_modal(s: str) -> str | None:
    m = re.search("|".join(ZH_MODALS), s)
    if not m:
        return None
    return s[:m.start()] + ZH_MODALS[m.group(0)] + s[m.end():]


def zh_flip_negation(s: str, rng: random.Random) -> str | None:
    drops = [w for w in ZH_NEG_DROP if w in s]
    adds = [w for w in ZH_NEG_ADD if w in s and ("不" + w) not in s and "无" + w[-1:] not in s]
    if drops and (not adds or rng.random() < 0.6):
        w = rng.choice(drops)
        return s.replace(w, ZH_NEG_DROP[w], 1)
    if adds:
        w = rng.choice(adds)
        return s.replace(w, ZH_NEG_ADD[w], 1)
    return None


def _other_number(n: int, rng: random.Random) -> int:
    choices = [x for x in (n * 2, n + 1, max(1, n // 2), n * 3, n + 10) if x != n and x > 0]
    return rng.choice(choices)


def zh_change_number(s: str, rng: random.Random) -> str | None:
    found = list(_ZH_NUM.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    num = m.group(2)
    try:
        value = int(num) if num.isdigit() else cn_to_int(num)
    except ValueError:
        return None
    new = _other_number(value, rng)
    shown = str(new) if num.isdigit() else int_to_cn(new)
    return s[:m.start(2)] + shown + s[m.end(2):]


def zh_invented(subject_from: str, donor: str, rng: random.Random) -> str:
    """A claim the passages do not make: the topic of a sentence sent, the predicate of a sentence of a
    law that was not sent (a model filling a gap with what laws usually say)."""
    cut = re.search(r"(?<=..)(?:的|应当|可以|不得|在|对|向|由|是|有|为|经|与|和|，)", subject_from)
    subject = subject_from[:cut.start()] if cut and cut.start() <= 12 else subject_from[:6]
    pred = re.search("|".join(ZH_MODALS), donor)
    if pred is None or rng.random() < 0.35:
        return donor
    return subject.rstrip("，、") + donor[pred.start():]


# -- English writers ---------------------------------------------------------------------------------------------
EN_MODALS = [("shall not", "may"), ("must not", "may"), ("may not", "may"), ("will not", "may"),
             ("agrees not to", "may"), ("is required to", "is not required to"), ("shall", "may"), ("must", "may"),
             ("will", "may"), ("may", "shall not")]
EN_PARA = {"Receiving Party": "recipient", "Disclosing Party": "discloser", "Confidential Information": "confidential material",
           "shall not": "must not", "shall": "must", "disclose": "reveal", "Agreement": "contract",
           "third parties": "outside parties", "third party": "outside party", "prior written consent": "written permission in advance",
           "terminate": "end", "obligations": "duties", "promptly": "quickly", "notify": "inform", "return": "give back",
           "destroy": "dispose of", "purpose": "aim", "including": "such as", "pursuant to": "under",
           "in accordance with": "following", "upon": "on", "written notice": "notice in writing", "Parties": "sides"}
EN_REFUSALS = ("The passages do not say whether {topic}.", "The provided passages do not address this question.",
               "I cannot determine this from the passages provided.", "There is no information in the passages about this.",
               "Based on the passages, it cannot be determined whether {topic}.")
EN_INVENTED = ("The Receiving Party shall pay liquidated damages of ${amount} for each breach of this Agreement.",
               "The obligations of confidentiality survive for {years} years after termination of this Agreement.",
               "The Disclosing Party may audit the Receiving Party's records on {days} days' written notice.",
               "Any dispute under this Agreement shall be settled by binding arbitration in Singapore.",
               "The Receiving Party must destroy all copies within {days} days and certify the destruction to the court.",
               "Either party may assign this Agreement to an affiliate without the consent of the other party.")
_EN_NUMWORD = {"ten": 10, "fifteen": 15, "twenty": 20, "thirty": 30, "forty-five": 45, "sixty": 60, "ninety": 90,
               "two": 2, "three": 3, "five": 5, "seven": 7}
_EN_NUM = re.compile(r"\b(\d+)\b|\b(" + "|".join(_EN_NUMWORD) + r")\b(?:\s*\((\d+)\))?", re.I)


def en_sentences(text: str) -> list[tuple[str, int]]:
    out = []
    for m in re.finditer(r"[^.;\n]+[.;]", text):
        s = m.group(0).strip()
        words = s.split()
        if 8 <= len(words) <= 60 and s[0].isupper():
            out.append((s[:-1] + ".", m.start()))
    return out


def en_section(label: str) -> str | None:
    m = re.search(r"§\s*([\w.]+)", label)
    return m.group(1).rstrip(".,") if m else None


def en_frame(s: str, n: int, section: str | None, rng: random.Random) -> str:
    body = s.rstrip(".")
    low = body[0].lower() + body[1:] if not body[:2].isupper() else body
    forms = [1, 2, 3] + ([0] if section else [])
    form = rng.choice(forms)
    if form == 0:
        return f"Under Section {section} [{n}], {low}."
    if form == 1:
        return f"{body} [{n}]."
    if form == 2:
        return f"The agreement provides that {low} [{n}]."
    return f"According to passage [{n}], {low}."


def en_paraphrase(s: str, rng: random.Random) -> str:
    out = s
    for a, b in EN_PARA.items():
        if re.search(rf"\b{a}\b", out) and rng.random() < 0.8:
            out = re.sub(rf"\b{a}\b", b, out)
    m = re.match(r"^(.*?),? (unless|provided that|except that|if) (.*)\.$", out)
    if m and len(m.group(1)) > 20 and rng.random() < 0.7:
        out = f"{m.group(2).capitalize()} {m.group(3)}, {m.group(1)[0].lower()}{m.group(1)[1:]}."
    return out


def en_flip_modal(s: str) -> str | None:
    for a, b in EN_MODALS:
        m = re.search(rf"\b{a}\b", s)
        if m:
            return s[:m.start()] + b + s[m.end():]
    return None


def en_invented(subject_from: str, donor: str, rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(EN_INVENTED).format(amount=f"{rng.choice([50, 100, 250, 500])},000",
                                             years=rng.choice([2, 3, 5, 7]), days=rng.choice([10, 15, 30, 45]))
    subj = re.match(r"^(The [A-Z][a-z]+(?: [A-Z][a-z]+)?|Each party|Either party|Recipient|Company)\b", subject_from)
    pred = re.search(r"\b(shall|must|will|may|agrees to)\b", donor)
    if subj and pred:
        return subj.group(1) + " " + donor[pred.start():]
    return donor


def en_change_number(s: str, rng: random.Random) -> str | None:
    found = list(_EN_NUM.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    value = int(m.group(1)) if m.group(1) else _EN_NUMWORD[m.group(2).lower()]
    new = _other_number(value, rng)
    return s[:m.start()] + str(new) + s[m.end():]


# -- one question, every kind ------------------------------------------------------------------------------------
class Writer:
    """Writes each kind of answer to one rendered prompt, reading only the prompt (and, for invented
    claims, documents that were not sent)."""

    def __init__(self, lang: str, question: str, prompt: str, donors: list[str], seed: str):
        self.lang, self.question, self.seed = lang, question, seed
        self.passages = read_prompt(prompt)
        self.donors = donors
        split = zh_sentences if lang == "zh" else en_sentences
        self.sents = [[(s, at) for s, at in split(text)] for _, text in self.passages]

    def rng(self, kind: str) -> random.Random:
        return _rng(self.seed, kind)

    def cite(self, i: int, s: str, at: int, rng: random.Random, bare_ok: bool = True) -> str:
        label, text = self.passages[i]
        if self.lang == "zh":
            return zh_frame(s, i + 1, zh_title(label, rng), zh_article(label, text, at), rng, bare_ok)
        return en_frame(s, i + 1, en_section(label), rng)

    def gold_first(self) -> list[int]:
        """Passages in the order a writer looks at them: the best match to the question first."""
        want = _grams(self.question, self.lang)
        return sorted(range(len(self.passages)), key=lambda i: -len(want & _grams(self.passages[i][1], self.lang)))

    def pick(self, rng: random.Random, test=lambda s: True) -> tuple[int, str, int] | None:
        for i in self.gold_first():
            ok = [(s, at) for s, at in self.sents[i] if test(s)]
            if ok:
                s, at = rng.choice(ok)
                return i, s, at
        return None

    def topic(self) -> str:
        parts = [p for p in re.split(r"[。？?！!\n]", self.question) if p.strip()]
        q = parts[-1].strip() if parts else self.question
        q = re.sub(r"^(场景|事实|罪名)[:：]", "", q)
        if self.lang == "en":
            m = re.search(r"does this agreement provide that:?\s*(.*)", self.question)
            q = (m.group(1) if m else q).rstrip(".?")
            return q[0].lower() + q[1:] if q else q
        return q[-30:]

    def donor(self, rng: random.Random) -> str:
        return rng.choice(self.donors)

    def write(self, kind: str) -> str | None:
        rng = self.rng(kind)
        return getattr(self, "_" + kind)(rng)

    # faithful
    def _quote(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        follow = [t for t, a in self.sents[i] if a > at][:1]
        if follow and rng.random() < 0.3:
            s = s + follow[0]
        return self.cite(i, s, at, rng)

    def _light_paraphrase(self, rng):
        got = self.pick(rng, lambda s: any(a in s for a in ZH_LIGHT))
        return None if not got else self.cite(got[0], zh_light(got[1], rng), got[2], rng)

    def _heavy_paraphrase(self, rng):
        got = self.pick(rng, lambda s: sum(a in s for a in {**ZH_LIGHT, **ZH_HEAVY}) >= 2)
        return None if not got else self.cite(got[0], zh_heavy(got[1], rng), got[2], rng)

    def _refusal(self, rng):
        return rng.choice(ZH_REFUSALS).format(topic=self.topic())

    def _two_passages(self, rng):
        order = self.gold_first()
        a = self.pick(rng)
        if not a:
            return None
        others = [i for i in order if i != a[0] and self.sents[i]]
        if not others:
            return None
        j = others[0]
        s, at = rng.choice(self.sents[j])
        return self.cite(a[0], a[1], a[2], rng) + self.cite(j, s, at, rng)

    # unfaithful
    def _true_plus_invented(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        inv = zh_invented(s, self.donor(rng), rng)
        tail = f"{inv.rstrip('。')}[{i + 1}]。" if rng.random() < 0.6 else inv
        return self.cite(i, s, at, rng) + tail

    def _invented(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        inv = zh_invented(s, self.donor(rng), rng)
        out = self.cite(i, inv, at, rng)
        if rng.random() < 0.4:
            out += f"{zh_invented(s, self.donor(rng), rng).rstrip('。')}[{i + 1}]。"
        return out

    def _flipped_modal(self, rng):
        got = self.pick(rng, lambda s: re.search("|".join(ZH_MODALS), s) is not None)
        return None if not got else self.cite(got[0], zh_flip_modal(got[1]), got[2], rng)

    def _flipped_negation(self, rng):
        got = self.pick(rng, lambda s: zh_flip_negation(s, random.Random(0)) is not None)
        return None if not got else self.cite(got[0], zh_flip_negation(got[1], rng), got[2], rng)

    def _changed_number(self, rng):
        got = self.pick(rng, lambda s: _ZH_NUM.search(s) is not None)
        if not got:
            return None
        changed = zh_change_number(got[1], rng)
        return None if changed is None else self.cite(got[0], changed, got[2], rng)

    def _invented_article(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        sent = set(find_article_refs("\n".join(lbl + "\n" + t for lbl, t in self.passages)))
        n = rng.choice([k for k in range(800, 1000) if str(k) not in sent])
        title = zh_title(self.passages[i][0], rng)
        return zh_frame(s, i + 1, title, f"第{int_to_cn(n)}条", rng, bare_ok=False)

    def _wrong_passage(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        wrong = rng.choice([k for k in range(len(self.passages)) if k != i])
        if rng.random() < 0.5:  # the article of the passage quoted, the number of another
            label, text = self.passages[i]
            return zh_frame(s, wrong + 1, zh_title(label, rng), zh_article(label, text, at), rng, bare_ok=False)
        return f"{s.rstrip('。')}[{wrong + 1}]。"

    # English
    def _en_quote(self, rng):
        got = self.pick(rng)
        return None if not got else self.cite(got[0], got[1], got[2], rng)

    def _en_paraphrase(self, rng):
        got = self.pick(rng, lambda s: sum(a in s for a in EN_PARA) >= 2)
        return None if not got else self.cite(got[0], en_paraphrase(got[1], rng), got[2], rng)

    def _en_refusal(self, rng):
        return rng.choice(EN_REFUSALS).format(topic=self.topic())

    def _en_invented(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        return self.cite(i, en_invented(s, self.donor(rng), rng), at, rng)

    def _en_mixed(self, rng):
        got = self.pick(rng)
        if not got:
            return None
        i, s, at = got
        inv = en_invented(s, self.donor(rng), rng)
        return self.cite(i, s, at, rng) + " " + (f"{inv.rstrip('.')} [{i + 1}]." if rng.random() < 0.6 else inv)

    def _en_flipped_modal(self, rng):
        got = self.pick(rng, lambda s: en_flip_modal(s) is not None)
        return None if not got else self.cite(got[0], en_flip_modal(got[1]), got[2], rng)


def _donors(lang: str, shared: Path, exclude: set[str], seed: str, sent_texts: list[str]) -> list[str]:
    """Sentences of two documents that were not sent, to invent claims from."""
    corpus = shared / "data" / f"legal_{lang}" / "corpus"
    docs = sorted((p for p in corpus.rglob("*") if p.is_file() and p.suffix in (".md", ".txt") and p.name not in exclude),
                  key=lambda p: _sha(seed + p.name))
    split = zh_sentences if lang == "zh" else en_sentences
    out: list[str] = []
    for d in docs[:3]:
        out += [s for c in _chunks(str(d)) for s, _ in split(c.text)]
    # contracts share boilerplate: a sentence that is also in a passage sent is not invented
    flat = [re.sub(r"\s+", " ", p) for p in sent_texts]
    out = [s for s in out if not any(re.sub(r"\s+", " ", s.rstrip(".。")) in p for p in flat)]
    return out or ["用人单位可以随时无理由辞退劳动者且无需支付任何补偿。"]


def _questions(lang: str, shared: Path) -> dict[str, dict]:
    path = shared / "data" / f"legal_{lang}" / "qa_dev.jsonl"
    return {q["id"]: q for q in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line)}


def _writer(q: dict, lang: str, shared: Path) -> tuple[Writer, list] | None:
    contexts = passages_for(q, lang, shared)
    if len(contexts) < 2:
        return None
    prompt = render_prompt(q["question"], contexts)
    sent = {Path(sc.chunk.source_path).name for sc in contexts}
    donors = _donors(lang, shared, sent, q["id"], [sc.chunk.text for sc in contexts])
    return Writer(lang, q["question"], prompt, donors, q["id"]), contexts


def choose(shared: Path = SHARED) -> list[dict]:
    """The manifest: questions in a fixed order (SHA-1 of their ids), each kept when every kind can be
    written from its passages, until QUESTIONS[lang] are kept."""
    rows = []
    for lang, kinds in (("zh", KINDS_ZH), ("en", KINDS_EN)):
        qs = _questions(lang, shared)
        kept = 0
        for qid in sorted(qs, key=_sha):
            q = qs[qid]
            if not q.get("gold") or (lang == "zh" and not q["gold"][0].get("article")):
                continue
            made = _writer(q, lang, shared)
            if made is None:
                continue
            w, _ = made
            answers = {k: w.write(k) for k in kinds}
            if any(a is None for a in answers.values()):
                continue
            kept += 1
            rows += [{"id": f"{lang}-{kept:03d}-{k}", "lang": lang, "question_id": qid, "kind": k,
                      "faithful": kinds[k]} for k in kinds]
            if kept >= QUESTIONS[lang]:
                break
    return rows


def build_set(shared: Path = SHARED, manifest: Path = MANIFEST) -> list[Case]:
    """Every labelled answer of the manifest, rebuilt from the corpus."""
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = {lang: _questions(lang, shared) for lang in {r["lang"] for r in rows}}
    writers: dict[str, tuple[Writer, list]] = {}
    out = []
    for r in rows:
        q = questions[r["lang"]][r["question_id"]]
        if r["question_id"] not in writers:
            made = _writer(q, r["lang"], shared)
            if made is None:
                raise RuntimeError(f"{manifest}: question {r['question_id']} has no passages in {shared}")
            writers[r["question_id"]] = made
        w, contexts = writers[r["question_id"]]
        answer = w.write(r["kind"])
        if answer is None:
            raise RuntimeError(f"{manifest}: {r['id']} cannot be written from {shared}: the corpus changed; "
                               "run bench/quality_set.py --choose")
        from rag_app.query.answer import passage_label

        out.append(Case(r["id"], r["lang"], r["kind"], FAITHFUL[r["kind"]], q["question"], answer,
                        tuple(sc.chunk.text for sc in contexts), tuple(passage_label(sc) for sc in contexts)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--choose", action="store_true", help="choose the questions again and rewrite the manifest")
    ap.add_argument("--show", type=int, default=0, help="print this many answers of each kind")
    args = ap.parse_args()
    if args.choose:
        rows = choose()
        MANIFEST.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{MANIFEST}: {len(rows)} answers")
    cases = build_set()
    print(Counter((c.lang, c.kind) for c in cases))
    if args.show:
        seen: Counter = Counter()
        for c in cases:
            if seen[c.kind] < args.show:
                seen[c.kind] += 1
                print(f"--- {c.case_id} ({'faithful' if c.faithful else 'unfaithful'})\n{c.answer}")


if __name__ == "__main__":
    main()
