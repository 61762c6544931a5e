"""One line per recipe setting, shown as the tooltip of its row in the Train tab (a newcomer meets "noam" or
"label_smoothing" there with nothing else to go on). Kept beside the form rather than in the engine's
dataclasses so the wording can speak to the person at the keyboard."""

from __future__ import annotations

SETTING_HELP = {
    "train.epochs": "Passes over the training data; more can help until validation stops improving.",
    "train.batch_size": "Sentence pairs per optimisation step (when max_tokens is 0); larger is smoother but slower.",
    "train.max_tokens": "Token budget per batch instead of a sentence count; 0 batches by sentences.",
    "train.lr": "Learning rate: the constant rate, the peak of inverse_sqrt/one_cycle, or noam's factor.",
    "train.schedule": "How the learning rate changes: constant, noam, inverse_sqrt (both warm up) or one_cycle.",
    "train.warmup": "Steps of linear warm-up before the rate decays (noam and inverse_sqrt only).",
    "train.label_smoothing": "Share of the target probability spread over other tokens (0.1 is usual); raises loss.",
    "train.clip_norm": "Largest gradient norm before it is scaled down (0 turns clipping off).",
    "train.weight_decay": "L2 penalty on the weights each step (0 = none).",
    "train.eval_every": "Steps between evaluations; 0 evaluates at the end of every epoch.",
    "train.bleu_sentences": "Validation sentences decoded for BLEU at each evaluation (0 = all; fewer is faster).",
    "train.keep_metric": "Which evaluation picks the best checkpoint: val_loss, bleu or accuracy.",
    "train.average_last": "At the end, average the weights of the last N epochs (0 = off; needs save_epochs).",
    "train.save_epochs": "Keep every epoch's weights next to the checkpoint (needed for averaging).",
    "train.seed": "Random seed of initialisation, batching and dropout: the same seed repeats the run.",
    "train.device": "Where to train: auto (a GPU when there is one), cpu or cuda.",
    "train.precision": "fp32, or bf16: mixed precision (bfloat16 autocast) on a CUDA GPU; a CPU run trains in fp32.",
    "train.threads": "CPU threads for torch (0 = torch's default); fewer leaves the computer responsive.",
    "train.teacher_forcing": "Chance that the decoder is fed the correct previous word rather than its own guess.",
    "model.d_model": "Width of every hidden vector (the embedding size of an LSTM model).",
    "model.enc_layers": "Encoder layers: more read the source more deeply, at the cost of speed.",
    "model.dec_layers": "Decoder layers.",
    "model.heads": "Attention heads per layer; d_model must divide by it.",
    "model.ff_dim": "Width of each layer's feed-forward block.",
    "model.dropout": "Share of activations zeroed during training, against over-fitting.",
    "model.positions": "How word order is given: a learned table or fixed sinusoids.",
    "model.norm": "post: LayerNorm after each residual (the references); pre: before it (trains more stably).",
    "model.tie_output": "Share the target embedding with the output layer: fewer parameters.",
    "model.max_positions": "Longest sequence (with <sos>/<eos>) the model can read or write.",
    "model.hidden": "LSTM state width.",
    "model.score": "LSTM attention score: dot, general (with a matrix) or concat (a small network).",
    "model.embed_init": "Initial token embeddings: xavier, or normal N(0, 1/d_model) as strong as the positions.",
    "corpus.limit": "Use only the first N training pairs (0 = all): quick experiments.",
    "min_freq": "Words seen fewer times in training become <unk>.",
    "probe": "Sentence translated at each evaluation to show attention forming.",
}


def setting_help(key: str) -> str:
    return SETTING_HELP.get(key, "")
