"""GGUF files of every family attnviz reads, written here as llama.cpp's converter writes them (``tests.gguf_file``):
the same network as the folder they came from (logits at float32), the same prompt and greedy tokens as
transformers loading the same file (``gguf_file=``, the test-only extra), every quantisation type dequantized as
``gguf``'s own reader dequantizes it, and damaged or foreign files refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnviz.cli.main import main
from attnviz.engine.config import DecodeConfig
from attnviz.engine.errors import CheckpointError
from attnviz.engine.hub import format_of
from attnviz.engine.hub.gguf_config import row_order
from attnviz.engine.hub.gguf_format import read_gguf
from attnviz.engine.hub.gguf_weights import dequantized
from attnviz.engine.loading import inspect_model, load_translator, read_card
from attnviz.engine.models.causal_lm import SPECIALS
from attnviz.engine.text.vocab import SOS_ID
from tests.gguf_file import permute, write_gguf
from tests.llm_folder import make_llm_folder

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")
SENTENCE = "Der Mann sieht den Hund über die Straße laufen."
# what a GGUF file can say of each family (llama.cpp writes no RoPE scaling rule, no attention bias for llama; the
# query scale and Qwen3's head width as transformers' GGUF loader assumes them)
GGUF_SHAPES = {"llama": dict(rope_scaling=None, attention_bias=False), "qwen2": {}, "qwen3": dict(head_dim=128),
               "gemma2": dict(head_dim=256, query_pre_attn_scalar=256),
               "gemma3": dict(head_dim=256, layer_types=None, rope_local_base_freq=None)}
MIXED = {"embed": "Q8_0", "attn": "Q4_0", "ffn": "Q5_1", "output": "Q8_0"}


@pytest.fixture(scope="module", params=sorted(GGUF_SHAPES))
def family(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"gguf-{request.param}")
    folder = make_llm_folder(root, request.param, overrides=GGUF_SHAPES[request.param])
    return request.param, folder, write_gguf(folder, root / "f32.gguf"), write_gguf(folder, root / "mixed.gguf", MIXED)


def _logits(translator, ids: list[int], answer: list[int]) -> torch.Tensor:
    model = translator.model
    with torch.no_grad():
        enc = model.encode(torch.tensor([[i + SPECIALS for i in ids]]))
        dec = model.decode(torch.tensor([[SOS_ID, *(i + SPECIALS for i in answer)]]), enc)
        return model.project(dec.hidden)[0]


def test_a_gguf_file_is_the_network_of_the_folder_it_came_from(family):
    name, folder, f32, _ = family
    ours, theirs = load_translator(f32, "float32"), load_translator(folder, "float32")
    assert format_of(f32).name == "gguf" and ours.config == theirs.config
    ids = list(ours.prompt(SENTENCE).ids)
    assert ids == list(theirs.prompt(SENTENCE).ids)  # the tokenizer rebuilt from the metadata reads the same ids
    torch.testing.assert_close(_logits(ours, ids, [5, 9, 30]), _logits(theirs, ids, [5, 9, 30]), atol=1e-5, rtol=0)
    assert ours.translate(SENTENCE, DecodeConfig(max_len=8)).tokens == \
        theirs.translate(SENTENCE, DecodeConfig(max_len=8)).tokens


@pytest.mark.parametrize("which", ["f32", "mixed"])
def test_prompt_and_greedy_tokens_are_transformers_on_the_same_file(family, which):
    _, _, f32, mixed = family
    path = f32 if which == "f32" else mixed
    ours = load_translator(path, "float32")
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    message = f"Translate the following text from German into English.\nGerman: {SENTENCE}\nEnglish:"
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                             add_generation_prompt=True)
    prompt = ours.prompt(SENTENCE)
    assert prompt.text == rendered and list(prompt.ids) == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    ids = list(prompt.ids)
    with torch.no_grad():
        out = reference.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 do_sample=False, max_new_tokens=10)
    new = out[0, len(ids):].tolist()
    cut = next((i for i, t in enumerate(new) if t in ours.model.arch.end_ids), len(new))
    got = ours.translate(SENTENCE, DecodeConfig(max_len=10))
    assert [ours.tgt_vocab.id(t) - SPECIALS for t in got.words] == new[:cut]
    if which == "mixed":  # quantized weights: the same model, a little off
        exact = load_translator(f32, "float32")
        a, b = _logits(ours, ids, [5]), _logits(exact, ids, [5])
        assert 0 < float((a - b).abs().max()) < 0.2 * float(b.abs().max())


def test_the_card_and_info_say_what_the_file_holds(family, capsys):
    _, folder, _, mixed = family
    card = read_card(mixed)
    assert card.kind.name == "llm" and card.parameters == read_card(folder).parameters
    notes = " ".join(inspect_model(mixed).notes)
    assert "Q8_0" in notes and "Q4_0" in notes and "bfloat16" in notes
    assert main(["info", str(mixed)]) == 0
    shown = capsys.readouterr().out
    assert "quantisation:" in shown and "Q5_1" in shown


TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


def test_every_type_dequantizes_as_ggufs_own_reader(tmp_path):
    from tests.gguf_file import add

    rng = np.random.default_rng(3)
    path = tmp_path / "types.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    values = {t: rng.normal(size=(6, 512)).astype(np.float32) for t in TYPES}
    for t in TYPES:
        add(writer, f"t.{t}", values[t], t, rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    found, reader = read_gguf(path), gguf.GGUFReader(str(path))
    assert found.type_counts() == {t: 1 for t in TYPES}
    for tensor in reader.tensors:
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        ours = dequantized(found, found.tensors[tensor.name], torch.float32)
        np.testing.assert_array_equal(ours.numpy(), expected)  # exact: gguf's arithmetic, a block of rows at a time
        if tensor.name in ("t.F32", "t.Q8_0"):  # and close to what was written
            np.testing.assert_allclose(ours.numpy(), values[tensor.name[2:]], atol=0.05)
    half = dequantized(found, found.tensors["t.Q4_K"], torch.bfloat16)
    assert half.dtype == torch.bfloat16 and torch.equal(half, ours.new_tensor(
        gguf.quants.dequantize(next(t for t in reader.tensors if t.name == "t.Q4_K").data, 12)).to(torch.bfloat16))


def test_the_llama_query_and_key_rows_go_back_to_their_order():
    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(32, 3)
    for heads in (4, 2):
        order = row_order("llama", "blk.0.attn_q.weight", 32, heads, heads)
        np.testing.assert_array_equal(permute(w, heads)[order], w)
    assert row_order("qwen2", "blk.0.attn_q.weight", 32, 4, 4) is None


def _write(path, arch="llama", tensors=None, **keys):
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in keys.items():
        writer.add_string(key, value) if isinstance(value, str) else writer.add_uint32(key, value)
    for name, values in (tensors or {"token_embd.weight": np.zeros((4, 32), np.float32)}).items():
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _refusal(path) -> str:
    with pytest.raises(CheckpointError) as err:
        load_translator(path)
    with pytest.raises(CheckpointError):
        read_card(path)
    return str(err.value)


def test_damaged_and_foreign_files_are_refused_in_one_line(family, tmp_path):
    _, _, f32, _ = family
    raw = f32.read_bytes()
    cases = {
        "not.gguf": (b"PK\x03\x04" + raw[4:200], "does not start with GGUF"),
        "cut.gguf": (raw[: len(raw) // 2], "outside the file"),
        "header.gguf": (raw[:40], "past the end of the file"),
        "version.gguf": (raw[:4] + (7).to_bytes(4, "little") + raw[8:], "version 7"),
        "swapped.gguf": (raw[:4] + (3).to_bytes(4, "big") + raw[8:], "big-endian"),
    }
    for name, (data, expected) in cases.items():
        (tmp_path / name).write_bytes(data)
        message = _refusal(tmp_path / name)
        assert expected in message and name in message and "\n" not in message
    message = _refusal(_write(tmp_path / "phi.gguf", "phi2"))
    assert "'phi2' model" in message and "attnviz opens the decoder-only architectures llama" in message


def test_a_nan_in_a_tensor_is_named(family, tmp_path):
    _, folder, f32, _ = family
    found = read_gguf(f32)
    embed = found.tensors["token_embd.weight"]
    raw = bytearray(f32.read_bytes())
    raw[embed.start:embed.start + 4] = np.float32(np.nan).tobytes()
    (tmp_path / "nan.gguf").write_bytes(bytes(raw))
    assert read_card(tmp_path / "nan.gguf").parameters == read_card(folder).parameters  # the card reads no value
    with pytest.raises(CheckpointError, match="token_embd.weight holds NaN"):
        load_translator(tmp_path / "nan.gguf")


def test_a_sentencepiece_tokenizer_reads_as_transformers_reads_it(tmp_path):
    from attnviz.engine.hub.gguf_tokens import gguf_tokenizer
    from tests.gguf_file import write_sentencepiece_gguf
    from tests.llm_folder import corpus

    path = write_sentencepiece_gguf(tmp_path / "spm.gguf", corpus())
    ours = gguf_tokenizer(read_gguf(path), "llama")
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    for text in [SENTENCE, "  zwei  Hunde, 123 Äpfel — ok?", "Grüße! C'est déjà l'été.\nneue Zeile", "x"]:
        for special in (True, False):
            assert ours.encode(text, add_special_tokens=special).ids == \
                theirs(text, add_special_tokens=special)["input_ids"], (text, special)
        ids = theirs(text)["input_ids"]
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)


def test_a_file_that_says_no_space_prefix_gets_none(tmp_path):
    """llama.cpp reads tokenizer.ggml.add_space_prefix false as no leading word marker, and so does attnviz
    (transformers' GGUF loader leaves the flag unread and adds one)."""
    from attnviz.engine.hub.gguf_tokens import gguf_tokenizer
    from tests.gguf_file import write_sentencepiece_gguf
    from tests.llm_folder import corpus

    spaced = gguf_tokenizer(read_gguf(write_sentencepiece_gguf(tmp_path / "a.gguf", corpus(), True)), "llama")
    plain = gguf_tokenizer(read_gguf(write_sentencepiece_gguf(tmp_path / "b.gguf", corpus(), False)), "llama")
    assert spaced.encode("Hund").tokens[1] == "\u2581" and plain.encode("Hund").tokens[1] != "\u2581"
    assert plain.decode(plain.encode("Hund den").ids, skip_special_tokens=True) == "Hund den"
