"""Build tiny bge-architecture models (BERT, random weights) that load through the same code path
as a real `BAAI/bge-*` folder: FlagModel for the embedder, FlagReranker for the reranker."""
from __future__ import annotations

from pathlib import Path


def build_tiny_models(root: Path, chars: list[str]) -> dict[str, Path]:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [c for c in chars if c.strip() and len(c) == 1]
    vocab_file = root / "vocab.txt"
    vocab_file.write_text("\n".join(dict.fromkeys(vocab)), encoding="utf-8")
    out = {}
    for name, seed in (("embedder-a", 1), ("embedder-b", 2), ("reranker", 3)):
        torch.manual_seed(seed)
        tok = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=False, tokenize_chinese_chars=True)
        cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=512, num_labels=1)
        model = BertForSequenceClassification(cfg) if name == "reranker" else BertModel(cfg)
        path = root / f"tiny-bge-zh-{name}"  # "bge" + "zh": same query instruction as bge-*-zh
        model.save_pretrained(path)
        tok.save_pretrained(path)
        out[name] = path
    return out
