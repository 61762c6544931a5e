"""The options of ``attnviz translate`` that trade nothing but time: ``--batch-size`` (sentences searched together,
sorted by length), ``--threads`` (torch's CPU threads) and the opt-in vocabulary shortlist ``--vmap``.

The default batch size depends on the precision, as measured by ``benchmarks/bench_batch_size.py`` on a
MarianMT-sized model at one thread (docs/benchmarks.md): int8 ran fastest in batches of 64, float32 of 128.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from attnviz.cli.args import int_range
from attnviz.engine.errors import InputError

if TYPE_CHECKING:
    from attnviz.engine.plain.translator import PlainTranslator
    from attnviz.engine.search.shortlist import Shortlist
    from attnviz.engine.translator import Translator

# sentences a batch, by precision: bench_batch_size (200 sentences, one thread) found float32 fastest at 128 (0.86x
# the time at 32) and int8 at 64 (0.91x; 128: 0.95x); half precision, slow on CPUs without half arithmetic, unmeasured
DEFAULT_BATCH = {"float32": 128, "int8": 64, "float16": 64, "bfloat16": 64}
MAX_BATCH = 4096
MAX_THREADS = 1024


def add_speed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch-size", type=int_range(1, MAX_BATCH), metavar="N",
                   help="sentences searched together (sorted by length) when no attention is captured; default: "
                        f"{DEFAULT_BATCH['float32']} at float32, {DEFAULT_BATCH['int8']} with --int8, "
                        f"{DEFAULT_BATCH['float16']} at half precision")
    add_threads(p)
    p.add_argument("--vmap", metavar="FILE",
                   help="opt-in vocabulary shortlist: restrict each batch's output to the target pieces a "
                        "CTranslate2 vocabulary map (lines 'SOURCE PIECES<TAB>TARGET PIECES') lists for its "
                        "sources; faster, and a token outside the map is never produced (not with --attention or "
                        "--n-best)")


def add_threads(p: argparse.ArgumentParser) -> None:
    """``--threads N``: translate's, and every analysis command's (they run on the torch path: ``torch_threads``)."""
    p.add_argument("--threads", type=int_range(1, MAX_THREADS), metavar="N",
                   help="CPU threads the products may use (default: one per core)")


def apply_threads(args: argparse.Namespace) -> None:
    """``--threads N``: the threads of numpy's BLAS (the plain runtime's products) and, when it is imported (the
    torch path imports it after this), torch's intra-op threads; set before the model is read."""
    if args.threads is not None:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # (it ships no types)

        threadpool_limits(args.threads, user_api="blas")
        if "torch" in sys.modules:
            torch_threads(args)


def torch_threads(args: argparse.Namespace) -> None:
    """``--threads N`` for torch, on the torch path."""
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)


def plain_translator(args: argparse.Namespace) -> PlainTranslator | None:
    """The torch-free runtime (``engine.plain``) for what it covers: a MarianMT folder of float32 safetensors
    weights, translated on the CPU without attention, n-best lists, int8, half precision, head masks, a shortlist,
    languages or a prompt; None for anything else (the torch path then runs it, and says what is wrong, if any)."""
    wanted = (args.attention or args.n_best or args.int8 or args.vmap or args.mask_heads or args.rescale_heads
              or args.src_lang or args.tgt_lang or args.prompt is not None)
    if wanted or args.dtype not in (None, "auto", "float32") or args.device != "cpu" or not args.model:
        return None
    from attnviz.engine.plain.translator import open_plain

    return open_plain(args.model)[0]


def batch_size(args: argparse.Namespace, translator: Translator | PlainTranslator) -> int:
    """``--batch-size``, else the default for the precision the model runs at."""
    if args.batch_size is not None:
        return int(args.batch_size)
    precision = "int8" if getattr(args, "int8", False) else translator.dtype
    return DEFAULT_BATCH.get(precision, DEFAULT_BATCH["float32"])


def shortlist(args: argparse.Namespace, translator: Translator) -> Shortlist | None:
    """``--vmap FILE`` read against the model's target vocabulary (refused in one line where it cannot apply); a
    note on stderr says the output is restricted."""
    if args.vmap is None:
        return None
    if args.attention or args.n_best:
        raise InputError("--vmap restricts the batched search only; drop --attention and --n-best, "
                                         "or --vmap")
    from attnviz.engine.search.shortlist import Shortlist, Vmap, restriction

    found = Shortlist.of(Vmap.read(args.vmap), translator.tgt_vocab)
    restriction(translator.model, [0], len(translator.tgt_vocab))  # refuses a kind that cannot restrict its output
    unknown = f"; {found.unknown} target piece(s) it names are not in the model's vocabulary" if found.unknown else ""
    rules = len(found.vmap.rules)
    print(f"attnviz: output restricted to the vocabulary shortlist of {args.vmap} ({rules} rule"
          f"{'' if rules == 1 else 's'}){unknown}", file=sys.stderr)
    return found
