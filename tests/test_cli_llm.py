"""``attnviz translate`` and ``info`` on a decoder-only LLM folder, with ``--prompt``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz.cli.main import main
from tests.llm_folder import make_llm_folder

pytest.importorskip("transformers")


def test_translate_and_info_open_an_llm_folder(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "gemma3")
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Gemma-like decoder" in out and "4 query heads sharing 2 key/value heads" in out
    assert "2 sliding-window layers (6)" in out
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]  # the embedding's, not attnviz's ids
    assert f"vocab      {rows:,} tokens (the embedding's rows), one vocabulary for the prompt and the answer" in out
    assert main(["translate", "-m", str(folder), "--max-len", "4", "Der Hund läuft."]) == 0
    first = capsys.readouterr()
    assert first.out.strip() and "limit of 4 tokens" in first.err
    assert main(["translate", "-m", str(folder), "--max-len", "4", "--prompt", "{src_lang}: {text}\\n{tgt_lang}:",
                 "Der Hund läuft."]) == 0
    assert capsys.readouterr().out.strip()


def test_prompt_is_refused_where_it_cannot_apply(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "qwen2")
    assert main(["translate", "-m", str(folder), "--prompt", "no field", "Der Hund."]) != 0
    assert "must hold {text} exactly once" in capsys.readouterr().err


def test_a_folders_sampling_is_its_default_seeded_and_said(tmp_path, capsys):
    import json

    from attnviz.engine.config import DecodeConfig
    from attnviz.engine.loading import load_translator

    folder = make_llm_folder(tmp_path, "qwen2")
    generation = json.loads((folder / "generation_config.json").read_text())
    generation.update(do_sample=True, temperature=0.7, top_p=0.8, max_new_tokens=6)
    (folder / "generation_config.json").write_text(json.dumps(generation))
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    # no top_k named: transformers' default of 50 applies, and is said
    assert "sampled at temperature 0.7, top-k 50, top-p 0.8 (seed 0)" in out and "not applied" not in out
    runs = []
    for _ in range(2):
        assert main(["translate", "-m", str(folder), "Der Hund läuft."]) == 0
        runs.append(capsys.readouterr().out)
    expected = load_translator(folder, "float32").translate("Der Hund läuft.", DecodeConfig(
        temperature=0.7, sample_top_k=50, sample_top_p=0.8, max_len=6)).text
    assert runs[0] == runs[1] == expected + "\n"


def test_evaluate_reads_references_with_the_llms_tokenizer_and_align_says_what_it_cannot(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "llama")
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("Der Hund läuft.\nEine Katze.\n")
    ref.write_text("The dog runs.\nA cat.\n")
    assert main(["evaluate", "-m", str(folder), "--src", str(src), "--ref", str(ref), "--max-len", "4"]) == 0
    out = capsys.readouterr().out
    loss = float(out.split("loss ")[1].split()[0])
    assert 0 < loss < 20  # every reference token is one the model can produce: no <unk> at an impossible logit
    gold = tmp_path / "gold.txt"
    src.write_text("Der Hund läuft .\nEine Katze .\n")
    ref.write_text("The dog runs .\nA cat .\n")
    gold.write_text("0-0 1-1 2-2 3-3\n0-0 1-1 2-2\n")
    assert main(["align", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--gold", str(gold),
                 "--zero-based", "--json", "--reverse-prompted"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["attention"].startswith("the prompt columns of the sentence's span") and len(found["spans"]) == 2
    assert "German: Der Hund läuft ." in found["first_prompt"] and found["prompt_languages"] == ["de", "en"]
    assert found["reverse_model"].endswith("(prompted the other way)") and "windowed_layers" not in found
    assert len(found["alignments"]) == 2 and np.array(found["aer_heads"]).shape == (3, 4)
    assert main(["align", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--reverse-prompted",
                 "--prompt", "{text} =>"]) != 0
    assert "names no language" in capsys.readouterr().err


def test_align_says_which_layers_a_sliding_window_limits(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "gemma3")
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("Der Hund läuft .\n")
    ref.write_text("The dog runs .\n")
    assert main(["align", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["windowed_layers"] == [1, 3] and found["window"] == 6 and "sliding-window" in found["window_note"]


def test_heads_and_head_importance_report_groups_and_what_they_read(tmp_path, capsys):
    folder = make_llm_folder(tmp_path, "mistral")  # every layer slides (window 6), 2 key/value heads
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("Der Hund läuft .\n")
    ref.write_text("The dog runs .\n")
    assert main(["heads", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["kv_groups"] == [[1, 2], [3, 4]] and found["windowed_layers"] == [1, 2, 3]
    assert {row["kind"] for row in found["heads"]} == {"cross", "decoder", "encoder"}
    assert main(["heads", "-m", str(folder), "--src", str(src), "--tgt", str(ref)]) == 0
    err = capsys.readouterr().err
    assert "note: cross: each output step's row over the whole prompt" in err
    assert "sliding-window layers: 1, 2, 3" in err
    assert main(["head-importance", "-m", str(folder), "--src", str(src), "--ref", str(ref), "--max-len", "2",
                 "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["layout"] == {"cross": [3, 4]} and len(found["heads"]) == 12  # each head once, not three times
    assert found["kv_groups"] == [[1, 2], [3, 4]] and "measured once" in found["same_heads"]
    assert main(["align", "-m", str(folder), "--src", str(src), "--tgt", str(ref), "--reverse-prompted",
                 "--reverse-model", str(folder)]) != 0
    assert "exclude each other" in capsys.readouterr().err


def test_attribute_prints_and_exports_the_three_shares_of_an_llm_prompt(tmp_path, capsys):
    import json

    import numpy as np

    folder = make_llm_folder(tmp_path / "m", "qwen2")
    out_file = tmp_path / "a.npz"
    assert main(["attribute", "-m", str(folder), "--method", "gradient-x-input", "--target", "der Hund",
                 "--out", str(out_file), "Der Hund läuft."]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if " span " in line]
    assert rows and all(" instr " in line and " prefix " in line for line in rows)
    for line in rows:  # span x instr y prefix z: three shares summing to 1 (to the printed rounding)
        words = line.split()
        values = [float(words[words.index(name) + 1]) for name in ("span", "instr", "prefix")]
        assert all(v >= 0 for v in values) and abs(sum(values) - 1) <= 0.015
    assert "the sentence (source span): columns" in printed
    arrays = np.load(out_file)
    sidecar = json.loads(out_file.with_suffix(".json").read_text())
    a, b = sidecar["span"]
    assert arrays["shares"].shape == (1, len(sidecar["tokens"]), 3) and arrays["span"].tolist() == [a, b]
    np.testing.assert_allclose(arrays["shares"].sum(-1), 1.0, rtol=1e-6)
    assert sidecar["src_roles"][a:b] == ["source"] * (b - a) and "instruction" in sidecar["src_roles"][:a]
    assert sidecar["source_text"] == "Der Hund läuft." and sidecar["settings"]["aggregate"] == "sum"
    assert "".join(sidecar["src_tokens"][a:b]).replace("\u2581", " ").strip().startswith("Der")
