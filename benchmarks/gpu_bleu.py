"""Test BLEU of German-English Multi30k checkpoints read from pre-tokenized files, printed as JSON: the model trained on
a GPU by ``benchmarks/gpu_check.sh`` beside the bundled one, through one pipeline.

The corpus files (``bench_train.py --write-tokenized DIR``) hold spaCy's lowercased tokens joined by spaces, so each
checkpoint's spaCy tokenizers are replaced by whitespace ones with the same lowercasing: the same tokens, without
spaCy (which a GPU machine may lack). ``bleu_tok`` (corpus BLEU on those tokens, as ``attnviz evaluate`` reports
it) is the figure to compare; greedy decoding at float32 on the CPU.

    python benchmarks/gpu_bleu.py --data-dir .gpu/data runs/gpu-de-en-big.safetensors models/de-en-multi30k.safetensors
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from attnviz.engine.config import DecodeConfig
from attnviz.engine.loading import load_translator
from attnviz.engine.models.protocol import count_parameters
from attnviz.engine.training.evaluation import evaluate_split

KEPT = ("bleu_tok", "sacrebleu", "chrf", "ppl", "sentences", "seconds", "decode")


def test_bleu(path: str, data_dir: str, split: str, limit: int) -> dict:
    """``path``'s report on ``split`` of the pre-tokenized corpus in ``data_dir``, its tokenizers whitespace ones."""
    translator = load_translator(path, "float32")
    for side in ("src_spec", "tgt_spec"):
        spec = getattr(translator, side)
        if spec.mode == "spacy":
            setattr(translator, side, dataclasses.replace(spec, mode="whitespace"))
    report = evaluate_split(translator, split, DecodeConfig(), "multi30k-de-en", data_dir, limit)
    return {"parameters": count_parameters(translator.model), "config": {
        key: translator.config.to_dict()[key] for key in ("d_model", "enc_layers", "dec_layers", "heads", "ff_dim")},
        **{key: report[key] for key in KEPT if key in report}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--data-dir", required=True, help="the pre-tokenized Multi30k files")
    parser.add_argument("--split", default="test", choices=("val", "test"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0: all)")
    args = parser.parse_args()
    print(json.dumps({"split": args.split, "data": "Multi30k, spaCy tokens pre-tokenized, whitespace tokenizers",
                      **{Path(p).name: test_bleu(p, args.data_dir, args.split, args.limit)
                         for p in args.checkpoints}}, indent=2))


if __name__ == "__main__":
    main()
