"""Chat templates that would hang, freeze the window or take gigabytes in one C call (big powers and products,
repeated strings and lists, padding filters, doubled strings) or raise what the sandbox does not (1 / 0, a range
past its limit, a constant too large to print) are refused in one line, in seconds, when compiled or rendered;
real templates still render as before."""

from __future__ import annotations

import time

import pytest

from attnviz.engine.errors import CheckpointError, InputError
from attnviz.engine.hub.llm_sandbox import MAX_INT_BITS, MAX_ITEMS
from attnviz.engine.hub.llm_tokens import compile_template, render

pytestmark = pytest.mark.timeout(60)


def _hostile() -> list[str]:
    """Templates built here, by kind: each would run away inside one call."""
    huge = [10 ** 8, 10 ** 9, MAX_INT_BITS * 4]
    found = [f"{{{{ ((messages|length + 9) ** {n}) % 7 }}}}" for n in huge]
    found += [f"{{{{ 'a' * {n} }}}}" for n in (MAX_ITEMS * 10, 10 ** 9)]
    found += [f"{{{{ ([0] * {n})|length }}}}" for n in (MAX_ITEMS * 10, 10 ** 9)]
    found += [f"{{{{ (2 ** {MAX_INT_BITS // 2}) * (3 ** {MAX_INT_BITS // 2}) }}}}"]
    found += ["{{ 'x'|center(10**10) }}", "{{ 'x'|indent(10**9) }}", "{{ messages|tojson(indent=10**9) }}"]
    found += ["{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
              "{{ ns.s|length }}"]
    found += ["{{ 1 / 0 }}", "{{ 5 // 0 }}", "{{ range(10**9)|length }}", "{{ 10**5000 }}", "{{ 10 ** -5000 }}"]
    return found


@pytest.mark.parametrize("source", _hostile())
def test_a_runaway_template_is_refused_in_one_line_in_seconds(source):
    start = time.monotonic()
    with pytest.raises((CheckpointError, InputError)) as err:
        render(compile_template("tokenizer_config.json", source), "Hallo", {})
    message = str(err.value)
    assert "chat template" in message and "\n" not in message and "Traceback" not in message
    assert time.monotonic() - start < 10


def test_real_templates_render_as_before():
    chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
              "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    assert render(compile_template("t", chatml), "Hallo", {}) == \
        "<|im_start|>user\nHallo<|im_end|>\n<|im_start|>assistant\n"
    small = ("{{ (2 ** 10) * 3 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'x'|center(5) }}|"
             "{{ messages|tojson(indent=2)|length }}")
    assert render(compile_template("t", small), "Hallo", {}).startswith("3072 ababab [1, 1]   x  |")


@pytest.mark.parametrize("prompt, said", [
    ("Translate: {text:>9}", "{text:>9}"),
    ("Translate: {text!r}", "{text!r}"),
    ("{src_lang:^100000000}: {text}", "{src_lang:^100000000}"),
    ("Translate {text} {text}", "exactly once"),
    ("Translate {query}", "{query}"),
    ("Translate {text", "not a valid template"),
])
def test_a_prompt_with_a_format_spec_or_a_bad_field_is_refused_in_one_line(prompt, said):
    from attnviz.engine.hub.llm_prompt import check_prompt

    with pytest.raises(InputError) as err:
        check_prompt(prompt)
    assert said in str(err.value) and "\n" not in str(err.value)
    assert check_prompt("Translate from {src_lang} into {tgt_lang}: {text}")


def test_a_tokenizer_panic_is_one_line_not_a_traceback(monkeypatch, capsys):
    """tokenizers' PanicException derives from BaseException (a hostile file's regex raises it): the command line
    says it in one line and exits 1; reading a tokenizer file maps it to the file's CheckpointError."""
    from attnviz.cli import main as cli
    from attnviz.engine.errors import is_panic

    class PanicException(BaseException):  # as pyo3 names it
        pass

    def panics(*_):
        raise PanicException("regex backtrack limit\nmore")

    monkeypatch.setattr(cli, "check_model", panics)
    assert cli.main(["info", "whatever"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnviz: error: the model's tokenizer failed (regex backtrack limit)") and \
        err.count("\n") == 1
    assert is_panic(PanicException()) and not is_panic(KeyboardInterrupt())
