import pytest
import torch

from attnviz.engine.config import ModelConfig
from attnviz.engine.corpus.batching import pad_batch
from attnviz.engine.errors import ConfigError
from attnviz.engine.kinds import check
from attnviz.engine.models.protocol import count_parameters
from attnviz.engine.models.transformer import Transformer
from attnviz.engine.text.vocab import PAD_ID


def small(**overrides) -> Transformer:
    torch.manual_seed(0)
    settings = dict(d_model=32, enc_layers=2, dec_layers=2, heads=4, ff_dim=64, max_positions=16) | overrides
    return Transformer(ModelConfig(30, 25, **settings)).eval()


def batch():
    src = pad_batch([[2, 5, 6, 7, 8, 3], [2, 9, 3]])  # second row padded with 3 pads
    tgt = pad_batch([[2, 4, 5, 6], [2, 7]])
    return src, tgt


def test_reference_a_has_exactly_the_published_parameter_count():
    assert count_parameters(Transformer(ModelConfig(7853, 5893))) == 9_038_341


def test_reference_b_is_expressible():
    cfg = ModelConfig(3901, 2591, d_model=128, enc_layers=4, dec_layers=4, heads=8, ff_dim=512,
                      positions="sinusoidal", ln_eps=1e-6)
    model = Transformer(cfg)
    assert model.src_embed.positions is None and model.src_embed.table.shape == (100, 128)
    assert model.encoder[0].res_attn.norm.eps == 1e-6 and len(model.decoder) == 4


@pytest.mark.parametrize("change,field", [
    (dict(d_model=30, heads=8), "divisible"), (dict(positions="rotary"), "positions"), (dict(norm="mid"), "norm"),
    (dict(dropout=1.5), "dropout"), (dict(kind="gru"), "kind"), (dict(src_vocab_size=0), "src_vocab_size"),
])
def test_config_refuses_impossible_values(change, field):
    with pytest.raises(ConfigError, match=field):
        check(ModelConfig(**(dict(src_vocab_size=10, tgt_vocab_size=10) | change)))


def test_config_round_trips_and_rejects_unknown_keys():
    cfg = ModelConfig(10, 12, norm="pre", tie_output=True)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="colour"):
        ModelConfig.from_dict(cfg.to_dict() | {"colour": 1})


def attention_of(model):
    src, tgt = batch()
    enc = model.encode(src, need_weights=True)
    dec = model.decode(tgt, enc, need_weights=True)
    return src, tgt, enc, dec


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_every_attention_row_sums_to_one(norm):
    _, _, enc, dec = attention_of(small(norm=norm))
    for w in enc.attention + dec.self_attention + dec.cross_attention:
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    assert len(enc.attention) == 2 and enc.attention[0].shape == (2, 4, 6, 6)
    assert dec.self_attention[0].shape == (2, 4, 4, 4) and dec.cross_attention[0].shape == (2, 4, 4, 6)


def test_decoder_self_attention_is_causal():
    _, _, _, dec = attention_of(small())
    for w in dec.self_attention:
        future = torch.ones(4, 4, dtype=torch.bool).triu(1)
        assert torch.all(w[..., future] == 0)


def test_pad_keys_get_zero_weight():
    src, _, enc, dec = attention_of(small())
    pad = src == PAD_ID  # [B, S]
    for w in enc.attention + dec.cross_attention:
        assert torch.all(w.permute(0, 2, 1, 3)[pad[:, None, None, :].expand(-1, w.size(2), w.size(1), -1)] == 0)
    assert pad[1].sum() == 3


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_fused_and_explicit_paths_agree(norm):
    model = small(norm=norm)
    src, tgt = batch()
    with torch.no_grad():
        fused_enc, explicit_enc = model.encode(src), model.encode(src, need_weights=True)
        fused = model.decode(tgt, fused_enc).hidden
        explicit = model.decode(tgt, explicit_enc, need_weights=True).hidden
    real = (src != PAD_ID)[..., None]
    assert torch.allclose(fused_enc.memory * real, explicit_enc.memory * real, atol=1e-5)
    assert torch.allclose(fused, explicit, atol=1e-5)


def test_incremental_decoding_equals_full_decoding():
    model = small()
    src, tgt = batch()
    with torch.no_grad():
        enc = model.encode(src)
        full = model.project(model.decode(tgt, enc, need_weights=True).hidden)
        cache = model.start(enc)
        for t in range(tgt.size(1)):
            logits, _, _ = model.step(tgt[:, t], cache, need_weights=False)
            assert torch.allclose(logits, full[:, t], atol=1e-5)
    assert cache.length == tgt.size(1)


def test_tied_output_shares_the_embedding():
    model = small(tie_output=True)
    assert model.out_proj.weight is model.tgt_embed.tokens.weight
    assert count_parameters(model) == count_parameters(small()) - 25 * 32


def test_decoding_past_the_position_table_is_refused_clearly():
    model = small(max_positions=4)
    src = torch.tensor([[2, 5, 3]])
    with pytest.raises(ValueError, match="exceeds the model's 4 positions"):
        model.decode(torch.full((1, 5), 2), model.encode(src))
    with pytest.raises(ValueError, match="exceeds the model's 4 positions"):
        model.encode(torch.full((1, 6), 5))


def test_gradients_flow_to_every_parameter():
    model = small().train()
    src, tgt = batch()
    model(src, tgt).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_normal_embedding_init_makes_tokens_as_strong_as_sinusoidal_positions():
    """embed_init "normal" draws tokens from N(0, D^-0.5): scaled by sqrt(D) they have norm about sqrt(D), like
    the sinusoidal positions (norm sqrt(D/2)), instead of Xavier's few-times-smaller values over a large vocabulary."""
    torch.manual_seed(0)
    cfg = dict(src_vocab_size=4000, tgt_vocab_size=3000, d_model=128, enc_layers=1, dec_layers=1, heads=8,
               ff_dim=64, positions="sinusoidal")
    xavier = Transformer(ModelConfig(**cfg))
    normal = Transformer(ModelConfig(**cfg, embed_init="normal"))
    for embed in ("src_embed", "tgt_embed"):
        std = getattr(normal, embed).tokens.weight.std().item()
        assert abs(std - 128 ** -0.5) < 0.01
        assert std > 2.5 * getattr(xavier, embed).tokens.weight.std().item()
    assert ModelConfig.from_dict(ModelConfig(**cfg, embed_init="normal").to_dict()).embed_init == "normal"
    with pytest.raises(ConfigError, match="embed_init"):
        ModelConfig(**cfg, embed_init="uniform")
