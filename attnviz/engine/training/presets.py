"""Named training recipes: data, tokenization, model and training settings in one frozen ``Recipe``.

Every field can be overridden with ``Recipe.override({"train.lr": "1e-3", "model.d_model": "128"})``, which is
what the CLI's flags and ``--set`` do. A recipe is stored inside the checkpoints it produces, so a model says how it
was made.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from attnviz.engine.config import DecodeConfig, ModelConfig, TrainConfig
from attnviz.engine.corpus.reader import CorpusSpec
from attnviz.engine.errors import ConfigError
from attnviz.engine.kinds import check, check_training, kind_of
from attnviz.engine.kinds.char_lm import CHAR_LM
from attnviz.engine.kinds.rnn_attention import RNN_ATTENTION
from attnviz.engine.text.tokenize import TokenizerSpec


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    corpus: CorpusSpec
    src_tokenizer: TokenizerSpec
    tgt_tokenizer: TokenizerSpec
    min_freq: int = 1
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig settings, vocab sizes come from the data
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    probe: str = ""  # the sentence whose attention is recorded at every evaluation

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelConfig:
        """The recipe's model for vocabularies of these sizes, checked by its kind (``ConfigError`` otherwise)."""
        return check(ModelConfig(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **self.model))

    @property
    def has_source(self) -> bool:
        """False when the recipe trains a language model (no source side)."""
        return kind_of(self.model_config(10, 10)).has_source

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["src_tokenizer"], data["tgt_tokenizer"] = self.src_tokenizer.to_dict(), self.tgt_tokenizer.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        return cls(name=data["name"], description=data["description"], corpus=CorpusSpec(**data["corpus"]),
                   src_tokenizer=TokenizerSpec(**data["src_tokenizer"]),
                   tgt_tokenizer=TokenizerSpec(**data["tgt_tokenizer"]), min_freq=data["min_freq"],
                   model=dict(data["model"]), train=TrainConfig.from_dict(data["train"]),
                   decode=DecodeConfig.from_dict(data["decode"]), probe=data.get("probe", ""))

    def override(self, settings: dict[str, str]) -> Recipe:
        """Apply ``section.field=value`` overrides (values parsed as JSON when possible, else kept as text)."""
        data = self.to_dict()
        for key, raw in settings.items():
            section, _, name = key.rpartition(".")
            target = data.get(section) if section else data
            if not isinstance(target, dict):
                raise ConfigError(f"unknown setting {key!r}; sections: model, train, decode, corpus, "
                                  "src_tokenizer, tgt_tokenizer")
            allowed = set(target)
            if section == "model":
                allowed |= {f.name for f in dataclasses.fields(ModelConfig)} - {"src_vocab_size", "tgt_vocab_size"}
            if name not in allowed:
                raise ConfigError(f"unknown setting {key!r}; known in {section or 'recipe'}: "
                                  f"{', '.join(sorted(allowed))}")
            target[name] = _parse(raw)
        try:
            recipe = Recipe.from_dict(data)
            check_training(recipe.model_config(10, 10), recipe.train)  # validate now, not after loading the data
        except TypeError as exc:
            raise ConfigError(f"invalid override: {exc}") from None
        return recipe


def _parse(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


# reference A's sample sentence in each Multi30k language: the probe of a recipe reading that language
_MULTI30K_PROBES = {"de": "Ein brauner Hund rennt dem schwarzen Hund hinterher.",
                    "fr": "Un chien brun court après le chien noir.",
                    "en": "A brown dog runs after the black dog."}


def _multi30k(name: str, src: str, description: str, tgt: str = "en", **changes: Any) -> Recipe:
    base = Recipe(
        name=name, description=description,
        corpus=CorpusSpec("multi30k", src, tgt),
        src_tokenizer=TokenizerSpec(src), tgt_tokenizer=TokenizerSpec(tgt), min_freq=2,
        model={}, train=TrainConfig(epochs=10, batch_size=128, lr=5e-4, clip_norm=1.0),
        probe=_MULTI30K_PROBES[src],
    )
    return dataclasses.replace(base, **changes)


_PLUS_DESCRIPTION = ("Our best {language} recipe at reference A's size: tied output embedding (7.5M parameters), "
                     "label smoothing 0.1, warm-up to 1e-3 with inverse-square-root decay, 20 epochs, the last 5 "
                     "epochs averaged, chosen by validation BLEU.")


def _multi30k_plus(name: str, src: str, language: str) -> Recipe:
    return _multi30k(name, src, _PLUS_DESCRIPTION.format(language=language), model=dict(tie_output=True),
                     train=TrainConfig(epochs=20, batch_size=128, lr=1e-3, schedule="inverse_sqrt", warmup=800,
                                       betas=(0.9, 0.98), adam_eps=1e-9, clip_norm=1.0, label_smoothing=0.1,
                                       keep_metric="bleu", average_last=5, save_epochs=True),
                     decode=DecodeConfig(beam=5, length_penalty=1.0))


_REF_B_MODEL = dict(d_model=128, enc_layers=4, dec_layers=4, heads=8, ff_dim=512, dropout=0.1,
                    positions="sinusoidal", ln_eps=1e-6)
_REF_B_TRAIN = TrainConfig(epochs=40, batch_size=256, lr=1.0, schedule="noam", warmup=4000, betas=(0.9, 0.98),
                           adam_eps=1e-9, clip_norm=0.0, keep_metric="val_loss", bleu_sentences=500)


def _tatoeba(name: str, src: str, description: str, prefixes: bool) -> Recipe:
    corpus = CorpusSpec("tatoeba", src, "en", file={"fr": "eng-fra.txt", "de": "deu.txt"}[src],
                        eng_prefixes=prefixes, max_words=10)
    def words(lang: str) -> TokenizerSpec:  # reference B's tokenizer: whitespace after its normalisation
        return TokenizerSpec(lang, mode="whitespace", normalize="tatoeba")

    return Recipe(name=name, description=description, corpus=corpus, src_tokenizer=words(src),
                  tgt_tokenizer=words("en"), min_freq=1, model=dict(_REF_B_MODEL),
                  train=_REF_B_TRAIN if prefixes else _REF_B_TRAIN.replace(epochs=20),
                  probe={"fr": "Je pars en vacances pour quelques jours.", "de": "Ich bin sehr müde."}[src])


_REF_C_MODEL = dict(kind=RNN_ATTENTION.name, d_model=256, hidden=512, enc_layers=2, dec_layers=2, dropout=0.2,
                    score="general")


def _names_char() -> Recipe:
    chars = TokenizerSpec("en", mode="chars")
    return Recipe(
        name="names-char",
        description="Reference D: character language model on names.txt (10% held out for validation): decoder-only "
                    "pre-LN Transformer, embedding 64, 4 heads, 4 blocks, context 32, Adam with a one-cycle "
                    "schedule to 1e-2, batch 16, 30 epochs; <sos>/<eos> mark the name boundaries.",
        corpus=CorpusSpec("lines", "en", "en", file="names.txt", val_fraction=0.1),
        src_tokenizer=chars, tgt_tokenizer=chars, min_freq=1,
        model=dict(kind=CHAR_LM.name, d_model=64, heads=4, enc_layers=0, dec_layers=4, ff_dim=256, dropout=0.0,
                   norm="pre", positions="learned", max_positions=32),
        train=TrainConfig(epochs=30, batch_size=16, lr=1e-2, schedule="one_cycle", clip_norm=1.0),
        decode=DecodeConfig(temperature=1.0),
        probe="mar")


PRESETS: dict[str, Recipe] = {r.name: r for r in [
    _multi30k("multi30k-de-en", "de",
              "Reference A: German->English Transformer on Multi30k (d 256, 3+3 layers, 8 heads, 9.04M parameters), "
              "Adam 5e-4, batch 128, 10 epochs, best validation loss."),
    _multi30k("multi30k-fr-en", "fr", "Reference A's architecture and training for French->English on Multi30k."),
    _multi30k("multi30k-en-de", "en",
              "Reference A in the other direction: English->German on the same Multi30k files, lowercased spaCy "
              "tokens, d 256, 3+3 layers, 8 heads, Adam 5e-4, batch 128, 10 epochs, best validation loss; the "
              "reverse model that symmetrised alignments need.", tgt="de"),
    _multi30k("multi30k-de-en-spm", "de",
              "Reference A's architecture and training on SentencePiece subwords: a unigram vocabulary of 8,000 "
              "pieces per side learned from the training split and stored in the checkpoint, so any input is read "
              "without <unk> (byte pieces cover unseen characters).",
              src_tokenizer=TokenizerSpec("de", mode="sentencepiece", vocab_size=8000),
              tgt_tokenizer=TokenizerSpec("en", mode="sentencepiece", vocab_size=8000), min_freq=1),
    _multi30k_plus("multi30k-de-en-plus", "de", "German"),
    _multi30k("multi30k-de-en-lstm", "de",
              "Reference C: German->English LSTM encoder-decoder with Luong global attention (2 layers, embedding "
              "256, hidden 512, 'general' score, dropout 0.2), Adam 1e-3, clip 1, batch 128, teacher forcing 0.5, "
              "10 epochs, best validation loss. Measured: test PPL 6.32 (reference C: 13.84), bleu_tok 34.20 greedy.",
              model=dict(_REF_C_MODEL), train=TrainConfig(epochs=10, batch_size=128, lr=1e-3, clip_norm=1.0,
                                                          teacher_forcing=0.5)),
    _multi30k("multi30k-de-en-lstm-small", "de",
              "The bundled LSTM (models/de-en-lstm-multi30k): reference C at embedding 96, hidden 256 (4.8M "
              "parameters, under 10 MB in float16), teacher forcing 1.0, one-cycle schedule peaking at 2e-3, "
              "14 epochs. Test PPL 6.44 (reference C: 13.84).",
              model=dict(_REF_C_MODEL, d_model=96, hidden=256),
              train=TrainConfig(epochs=14, batch_size=128, lr=2e-3, schedule="one_cycle", clip_norm=1.0,
                                bleu_sentences=300)),
    _multi30k_plus("multi30k-fr-en-plus", "fr", "French"),
    _tatoeba("tatoeba-fr-en-small", "fr",
             "Reference B: French->English on the Tatoeba 'I am / he is' subset (10,599 pairs, 80/20 split seed "
             "1234), d 128, 4+4 layers, sinusoidal positions, warm-up schedule, 40 epochs.", True),
    _tatoeba("tatoeba-fr-en", "fr", "Reference B's architecture on all Tatoeba French->English pairs under 10 words.",
             False),
    _tatoeba("tatoeba-de-en", "de", "Reference B's architecture on all Tatoeba German->English pairs under 10 words.",
             False),
    _names_char(),
]}


def get_preset(name: str) -> Recipe:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(PRESETS)} (see `attnviz presets`)")
    return PRESETS[name]
