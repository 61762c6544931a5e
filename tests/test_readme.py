"""The README is the front door: short, with the set-up commands CI runs, a command list that matches the parsers,
and links that resolve (the rest of the documentation is docs/, built strictly by `mkdocs build --strict`)."""

from __future__ import annotations

import re
from pathlib import Path

from attnviz.cli.reference import commands, reference_markdown

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TEST_COMMAND = ('<!-- test-command: .ci/run runs exactly the next line -->\n```bash\n'
                'python3 -m venv .venv && .venv/bin/pip install --no-compile -e ".[test]" && '
                '.venv/bin/python -m pytest -n auto\n```\n')


def test_readme_is_short_and_links_the_cli_reference():
    assert len(README.splitlines()) <= 220
    assert "](docs/cli-reference.md)" in README


def test_readme_keeps_the_set_up_commands_ci_runs():
    assert TEST_COMMAND in README  # .ci/run greps the line after the marker
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/attnviz\n" in README


def test_readme_command_list_matches_the_parsers():
    listed = re.findall(r"^\| `attnviz ([\w-]+)` \| (.+) \|$", README, flags=re.M)
    assert listed == commands()


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) > 15
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_cli_reference_renders_every_command_and_its_options():
    page = reference_markdown()
    for name, _ in commands():
        assert f"## attnviz {name} {{#attnviz-{name}}}" in page
        assert f"usage: attnviz {name}" in page
    assert "## attnviz data download {#attnviz-data-download}" in page  # nested commands too
    section = page.split("{#attnviz-attribute}")[1]
    assert "--method METHOD" in section and "--foil TOKEN" in section
    assert max(len(line) for line in page.splitlines() if not line.startswith("|")) <= 100  # a fixed width
