"""Translator: a model with its vocabularies and tokenizers, the object outside code works with.

A language model (``has_source`` False) is a Translator without a source: the text given to ``steps`` is the
prefix it continues, and ``generate`` samples whole sequences.

``load_checkpoint(path)`` reads a checkpoint file (``engine.loading.load_translator`` opens a file or an imported
model's folder); ``Translator.steps`` streams one sentence's decoding as events;
``translate`` returns a whole ``Translation``; ``translate_batch`` decodes many sentences in padded, length-sorted
batches (greedy or beam). ``save`` writes the translator back as a self-describing checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import torch

from attnviz.engine.checkpoints.assign import build_loaded
from attnviz.engine.checkpoints.card import ModelCard, card_from_metadata
from attnviz.engine.checkpoints.header import TOKENIZER_PREFIX, read_header
from attnviz.engine.checkpoints.mapped import map_tensors
from attnviz.engine.checkpoints.memory import AUTO, check_device_choice
from attnviz.engine.checkpoints.parts import checked_languages, checkpoint_parts
from attnviz.engine.checkpoints.store import check_against_index, check_finite, model_shapes, save_tensors
from attnviz.engine.config import DecodeConfig, ModelConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import CheckpointError, InputError, cut
from attnviz.engine.events import BeamDone, BeamStep, DecodeStep, EncoderPass, Translation, assemble
from attnviz.engine.kinds import ModelKind, kind_of
from attnviz.engine.models.protocol import IncrementalModel, count_parameters, stored_state
from attnviz.engine.models.quantize import int8_summary
from attnviz.engine.search.beam import beam_steps
from attnviz.engine.search.greedy import DecodeInput, decode_steps
from attnviz.engine.search.head_mask import heads_off
from attnviz.engine.search.limit import BatchProgress
from attnviz.engine.search.shortlist import Shortlist, restriction
from attnviz.engine.search.torch_batch import beam_batch, greedy_batch
from attnviz.engine.text.languages import Languages, iso
from attnviz.engine.text.source import SourceText, _fit, _read_text, _text
from attnviz.engine.text.tokenize import MULTILINGUAL, TokenizerSpec, languages_label
from attnviz.engine.text.vocab import Vocab

GREEDY = DecodeConfig()
SAMPLED = DecodeConfig(temperature=1.0)


def resolve_device(choice: str, kind: ModelKind | None = None) -> torch.device:
    """The device ``choice`` names (``DEVICE_CHOICES``) for a model of ``kind``: ``auto`` is the CUDA GPU when torch
    sees one and the kind decodes there, else the CPU; ``cuda`` without a GPU, or for a kind that decodes on the CPU
    only, is refused (``CheckpointError``) before anything is loaded."""
    check_device_choice(choice)
    gpu = torch.cuda.is_available()
    runs_there = kind is None or kind.runs_on_gpu
    if choice == AUTO:
        return torch.device("cuda" if gpu and runs_there else "cpu")
    if choice == "cuda" and not gpu:
        raise CheckpointError(f"device 'cuda' was asked but torch {torch.__version__} sees no CUDA GPU on this "
                              "machine; run on the CPU (device cpu), or auto (the GPU when there is one).")
    if choice == "cuda" and kind is not None and not runs_there:
        raise CheckpointError(f"a {kind.title} decodes on the CPU only in attnviz (device cuda is for decoder-only "
                              "LLMs); run it on the CPU (device cpu or auto).")
    return torch.device(choice)


def build_model(cfg: ModelConfig) -> IncrementalModel:
    """The network of a config's kind, freshly initialised (the registry entry builds it)."""
    return kind_of(cfg).build(cfg)


class Translator(SourceText):
    """A model ready to translate: tokenizer -> vocab ids -> model -> search -> tokens -> text."""

    def __init__(self, model: IncrementalModel, src_vocab: Vocab, tgt_vocab: Vocab, src_spec: TokenizerSpec,
                 tgt_spec: TokenizerSpec, metadata: dict[str, Any] | None = None):
        self.model = model.eval()
        self.kind: ModelKind = kind_of(model.cfg)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_spec, self.tgt_spec = src_spec, tgt_spec
        self.metadata = dict(metadata or {})
        self.languages: Languages | None = None  # a multilingual model's language tags (``use_languages``)
        if "languages" in self.metadata:
            self._set_languages(checked_languages(self.metadata["languages"], tgt_vocab))

    def _set_languages(self, languages: Languages) -> None:
        self.languages = languages
        self.metadata["languages"] = languages.to_dict()
        self.src_spec = dataclasses.replace(self.src_spec, lang=iso(languages.src) if languages.src else MULTILINGUAL)
        self.tgt_spec = dataclasses.replace(self.tgt_spec, lang=iso(languages.tgt))

    def choosing(self, src: str | None = None, tgt: str | None = None, prompt: str | None = None) -> Self:
        """This model with other request settings: a view that shares the network, vocabularies and tokenizer, with
        the languages (``use_languages``' rules) and the LLM prompt (``use_prompt``'s) chosen, None keeping each.
        This translator is left as it is, so a decode or an analysis running on it meanwhile never reads a
        half-changed pair; the GUI and the notebook API make a view per choice and hand each job the view it was
        asked with (InputError, nothing made, for a choice the model refuses)."""
        view = copy.copy(self)
        view.metadata = dict(self.metadata)
        view.use_languages(src, tgt)
        view.use_prompt(prompt)
        return view

    def use_languages(self, src: str | None = None, tgt: str | None = None) -> None:
        """A multilingual model translates from ``src`` ("auto": guessed from each text) into ``tgt``, each named by
        an ISO 639 code or the model's own tag (``InputError`` naming the choices for one it lacks); a model of one
        language pair takes neither (``InputError``). It changes this translator: only for one no other thread
        uses (the command line's, just loaded); anything shared takes a view (``choosing``)."""
        if self.languages is None:
            if src is None and tgt is None:
                return
            raise InputError(f"This model translates {languages_label(self.src_spec.lang, self.tgt_spec.lang)} "
                             "only; --src-lang and --tgt-lang choose the languages of a multilingual model (NLLB-200, "
                             "M2M100, mBART-50).")
        self._set_languages(self.languages.choose(src, tgt))

    prompt_template: str | None = None  # the instruction a prompt-reading LLM puts each sentence in (none here)

    def use_prompt(self, prompt: str | None) -> None:
        """A decoder-only LLM reads each sentence in the instruction ``prompt`` (``engine.hub.llm_translator``); a
        model that translates the sentence itself takes none (``InputError``). As ``use_languages``, it changes this
        translator: anything shared takes a view (``choosing``)."""
        if prompt is not None:
            raise InputError("--prompt is the instruction a decoder-only LLM reads; this model translates the "
                             "sentence itself and takes no prompt.")

    def _lead(self) -> tuple[int, ...]:
        """The target ids every translation starts with: a multilingual model's target language tag."""
        return (self.tgt_vocab.id(self.languages.tgt),) if self.languages is not None else ()

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def has_source(self) -> bool:
        """False for a language model: it continues a prefix instead of translating a sentence."""
        return self.kind.has_source

    @property
    def device(self) -> str:
        """The device the model runs on ("cpu", "cuda:0")."""
        return str(next(self.model.parameters()).device)

    def to_device(self, choice: str) -> None:
        """Run the model on the device ``choice`` names (``resolve_device``: refused clearly where it cannot): its
        weights and buffers move there, and decoding makes every tensor on the model's device, bringing what the
        events hold (captured attention, probabilities) to the CPU once per step."""
        self.model.to(resolve_device(choice, self.kind))

    @property
    def dtype(self) -> str:
        """The dtype the model runs at ("float32", "float16", "bfloat16")."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    @property
    def card(self) -> ModelCard:
        """This model described as a checkpoint's card (its metadata, the live parameter count, the dtype it runs
        at)."""
        meta = self.metadata | {"runs_as": self.dtype, "int8": int8_summary(self.model), "model": self.config.to_dict(),
                                "src_vocab": self.src_vocab.to_list(), "tgt_vocab": self.tgt_vocab.to_list(),
                                "src_tokenizer": self.src_spec.to_dict(), "tgt_tokenizer": self.tgt_spec.to_dict()}
        return card_from_metadata(meta, count_parameters(self.model), meta.get("path"))

    @property
    def info(self) -> dict[str, Any]:
        """The card as plain JSON (what ``attnviz info --json`` prints and exports carry)."""
        return self.card.to_info()

    # -- source preparation ---------------------------------------------------------------------------------------

    def refuse_beyond_positions(self, text: str, why: str) -> None:
        """Refuse (InputError, with the limit) a text longer than the model reads at once, where cutting it, as a
        translation does with a warning, would answer for another text (``why`` says what was asked)."""
        source = self.has_source
        tokens = _read_text(self.src_spec if source else self.tgt_spec, _text(text, "sentence"))[0]
        limit = self.model.max_source_len - 2 if source else self.model.max_target_len - 1
        if len(tokens) > limit:
            raise InputError(f"The sentence has {len(tokens):,} tokens but the model reads at most {limit:,} (its "
                             f"positions); {why} of the first {limit:,} would not be one of the sentence given. "
                             f"Shorten it to at most {limit:,} tokens.")

    def prepare_prefix(self, text: str) -> tuple[list[int], list[str]]:
        """A language model's prefix (possibly empty) as target ids, and warnings."""
        tokens, hidden = _read_text(self.tgt_spec, _text(text, "prefix"))
        tokens, warnings = _fit(tokens, self.tgt_vocab, self.model.max_target_len - 1,
                                "The prefix has {n} tokens but the model's context holds {limit}; only the first "
                                "{limit} were kept.")
        return self.tgt_vocab.encode(tokens), hidden + warnings

    def prepare(self, text: str, forced: Sequence[int] | None = None) -> DecodeInput:
        """What decoding reads: a translation model's tokenized source, or a language model's forced prefix.

        ``forced`` target ids (a what-if prefix) replace a language model's prefix and lead a translation."""
        if self.has_source:
            labels, ids, warnings = self.prepare_source(text)
            if self.kind.reads_prompt:  # the last token is the first decoder input, not a source column
                labels = labels[:-1]
            return DecodeInput(ids, labels, (*self._lead(), *(forced or ())), warnings)
        prefix, warnings = self.prepare_prefix(text)
        return DecodeInput((), (), tuple(prefix if forced is None else forced), warnings)

    def reference_tokens(self, text: str) -> list[str]:
        """A target-side text (a reference, a foil) as the model's output tokens: the target tokenizer's (an LLM's
        own tokenizer's)."""
        return self.tgt_spec.tokenize(text)

    def source_ids(self, src_tokens: Sequence[str]) -> list[int]:
        """What the model reads for a source shown as ``src_tokens`` (an attribution's teacher-forced source): their
        ids (a prompt-reading LLM adds the prompt's last token, its first decoder input)."""
        return self.src_vocab.encode(src_tokens)

    def target_ids(self, text: str) -> list[int]:
        """Target-side text (a typed forced prefix) as vocabulary ids; raises ``InputError`` naming the words the
        vocabulary lacks, since forcing ``<unk>`` would not be what was typed."""
        tokens = self.tgt_spec.tokenize(_text(text, "target prefix"))
        unknown = sorted({t for t in tokens if t not in self.tgt_vocab})
        if unknown:
            raise InputError(f"Not in the model's output vocabulary: {', '.join(cut(t) for t in unknown[:8])}. Choose "
                             "words the model knows (its top-k lists show some).")
        return self.tgt_vocab.encode(tokens)

    # -- decoding ---------------------------------------------------------------------------------------------------

    def steps(self, text: str, decode: DecodeConfig = GREEDY, *, recompute: bool = False,
              generator: torch.Generator | None = None,
              forced: Sequence[int] | None = None) -> Iterator[EncoderPass | DecodeStep]:
        """Decoding of one sentence (or a language model's prefix) as events: an ``EncoderPass``, then a
        ``DecodeStep`` per token; greedy, or sampled at ``decode.temperature`` (from ``generator``, or one seeded
        with ``decode.seed``), after the ``forced`` target ids if any. ``recompute`` decodes the whole prefix at
        every step (the reference for tests)."""
        if decode.temperature > 0 and generator is None:
            generator = torch.Generator().manual_seed(decode.seed)
        yield from decode_steps(self.model, self.prepare(text, forced), self.tgt_vocab, decode, recompute, generator)

    def beam_steps(self, text: str, decode: DecodeConfig,
                   forced: Sequence[int] | None = None) -> Iterator[EncoderPass | BeamStep | BeamDone]:
        """Beam search of one sentence (width ``decode.beam``) as events, with every candidate's attention."""
        yield from beam_steps(self.model, self.prepare(text, forced), self.tgt_vocab, decode)

    def translate(self, text: str, decode: DecodeConfig = GREEDY, *,
                  generator: torch.Generator | None = None) -> Translation:
        encoded, *rest = self.steps(text, decode, generator=generator)
        if not isinstance(encoded, EncoderPass):  # decode_steps yields the encoder's pass first
            raise TypeError(f"decoding began with {type(encoded).__name__}, not an EncoderPass")
        steps = [e for e in rest if isinstance(e, DecodeStep)]
        return assemble(encoded, steps, self.detokenize([s.token for s in steps]))

    def generate(self, prefix: str = "", n: int = 1, decode: DecodeConfig = SAMPLED) -> list[Translation]:
        """``n`` continuations of ``prefix`` drawn one after another from one generator seeded with
        ``decode.seed`` (greedy when ``decode.temperature`` is 0, so all ``n`` are then the same)."""
        generator = torch.Generator().manual_seed(decode.seed)
        return [self.translate(prefix, decode, generator=generator) for _ in range(n)]

    def translate_batch_tokens(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                               batch_size: int = 128, shortlist: Shortlist | None = None,
                               progress: BatchProgress | None = None) -> list[list[str]]:
        """Output tokens (no specials) of many sentences, searched in batches of ``batch_size`` sentences of similar
        length; empty inputs give empty outputs. ``shortlist``: restrict each batch's output vocabulary to its
        sources' candidates (``engine.search.shortlist``, opt-in). ``progress(done, total, step, limit)`` hears of
        each step of each batch: the sentences finished before it, of how many, and its step of the step limit."""
        decode = decode or GREEDY
        texts = [_text(text, "sentence") for text in texts]  # bytes fail the call, not read as an empty line
        prepared: dict[int, tuple[list[str], list[int]]] = {}  # input index -> source pieces and ids
        for i, text in enumerate(texts):
            try:
                pieces, ids, _ = self.prepare_source(text)
                prepared[i] = (pieces, ids)
            except InputError:
                continue
        order = sorted(prepared, key=lambda i: len(prepared[i][1]))
        results: list[list[str]] = [[] for _ in texts]
        lead = self._lead()
        with torch.inference_mode(), heads_off(self.model, decode.heads_off, decode.rescale_heads):
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                src = pad_batch([prepared[i][1] for i in chunk])
                restricted = None if shortlist is None else restriction(self.model, shortlist.candidates(
                    [prepared[i][0] for i in chunk], [*lead, decode.forced_bos, decode.forced_eos]),
                    len(self.tgt_vocab))
                tick = None if progress is None else functools.partial(progress, start, len(order))
                if decode.beam > 1:
                    out = beam_batch(self.model, src, decode, lead, restricted, tick)
                else:
                    out = greedy_batch(self.model, src, decode.max_len, decode, lead, restricted, tick)
                for i, ids in zip(chunk, out, strict=True):
                    results[i] = self.tgt_vocab.decode(ids[len(lead):])
        return results

    def translate_batch(self, texts: Sequence[str], decode: DecodeConfig | None = None,
                        batch_size: int = 128, shortlist: Shortlist | None = None) -> list[str]:
        return [self.detokenize(toks) for toks in self.translate_batch_tokens(texts, decode, batch_size, shortlist)]

    # -- persistence ------------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, half: bool = False, **extra: Any) -> None:
        """Write a checkpoint; ``extra`` entries (metrics, history, name...) join the metadata."""
        save_tensors(path, *self.checkpoint_parts(**extra), half=half)

    def checkpoint_parts(self, **extra: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The tensors and metadata ``save`` writes (a run's state file embeds them too)."""
        state = stored_state(self.model) | tokenizer_tensors(self.src_spec, self.tgt_spec)
        meta = {k: v for k, v in self.metadata.items() if k not in ("format", "format_version", "dtype", "path")}
        meta.update(extra)
        meta.update(model=self.config.to_dict(), src_vocab=self.src_vocab.to_list(), tgt_vocab=self.tgt_vocab.to_list(),
                    src_tokenizer=self.src_spec.to_dict(), tgt_tokenizer=self.tgt_spec.to_dict())
        return state, meta


def tokenizer_tensors(src: TokenizerSpec, tgt: TokenizerSpec) -> dict[str, torch.Tensor]:
    """The SentencePiece models of both sides as uint8 tensors, so one checkpoint file holds everything."""
    return {f"{TOKENIZER_PREFIX}{side}": torch.frombuffer(bytearray(spec.model_proto), dtype=torch.uint8)
            for side, spec in (("src", src), ("tgt", tgt)) if spec.model_proto}


def check_model_size(path: str | os.PathLike[str], cfg: ModelConfig) -> None:
    """Refuse a config whose model cannot be built or is too large, on torch's meta device (nothing allocated)."""
    model_shapes(path, build_model, cfg)


def check_index(path: str | os.PathLike[str], cfg: ModelConfig, index: dict[str, Any]) -> None:
    """Refuse a checkpoint whose tensor index (tokenizer models aside) is not the stored state of ``cfg``'s model."""
    weights = {k: v for k, v in index.items() if not k.startswith(TOKENIZER_PREFIX)}
    check_against_index(path, build_model, cfg, weights)


def load_checkpoint(path: str | os.PathLike[str], dtype: str = "float32") -> Translator:
    """Load a checkpoint file into a ready ``Translator`` running at ``dtype`` (its weights mapped, not copied, at
    their stored dtype: ``engine.checkpoints.assign``); raises ``CheckpointError`` with a clear message."""
    path = str(path)
    meta, index = read_header(path)
    parts = checkpoint_parts(path, meta, index)  # the metadata checked as info checks it
    cfg = parts.config
    # shapes are compared on a meta-device model first, so a size bomb is refused before anything is allocated
    check_index(path, cfg, index)
    tensors = map_tensors(Path(path), index, "a checkpoint file; choose a .safetensors file")
    protos = {side: bytes(tensors.pop(f"{TOKENIZER_PREFIX}{side}").numpy()) for side in ("src", "tgt")
              if f"{TOKENIZER_PREFIX}{side}" in tensors}
    src_spec, tgt_spec = (dataclasses.replace(spec, model_proto=protos.get(side, b""))
                          for side, spec in (("src", parts.src_spec), ("tgt", parts.tgt_spec)))
    check_finite(path, tensors)
    model = build_loaded(path, cfg, tensors, dtype)
    meta["path"] = path
    return Translator(model, parts.src_vocab, parts.tgt_vocab, src_spec, tgt_spec, meta)
