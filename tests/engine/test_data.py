"""Corpus readers, the data folder lookup, reference B's filter and split, and the downloader."""

import functools
import gzip
import http.server
import shutil
import threading
import zipfile

import pytest

from attnviz.engine.corpus import download as dl
from attnviz.engine.corpus.reader import (
    CorpusSpec,
    default_data_dir,
    load_splits,
    read_parallel,
    read_tsv,
    resolve_data_dir,
)
from attnviz.engine.errors import DataError


def test_parallel_files_gzipped_or_plain_with_odd_whitespace(tmp_path):
    (tmp_path / "a.de").write_text("Ein\tHund .\n  \nZwei\u00a0Katzen\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.en.gz", "wt", encoding="utf-8") as f:
        f.write("A dog .\nempty source\nTwo cats\n")
    pairs, dropped = read_parallel(tmp_path / "a.de", tmp_path / "a.en.gz")
    assert pairs == [("Ein Hund .", "A dog ."), ("Zwei Katzen", "Two cats")] and dropped == 1


def test_misaligned_files_are_reported_with_both_counts(tmp_path):
    (tmp_path / "s.txt").write_text("a\nb\nc\n")
    (tmp_path / "t.txt").write_text("x\ny\n")
    with pytest.raises(DataError, match=r"s.txt has 3 lines but .*t.txt has 2"):
        read_parallel(tmp_path / "s.txt", tmp_path / "t.txt")


def test_tsv_errors_name_file_and_line(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("Hi.\tHallo!\tCC-BY attribution\nNo tab here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"p.tsv, line 2: expected at least 2 TAB-separated columns"):
        read_tsv(path)
    path.write_bytes(b"ok\tok\n\xff\xfe\tbad\n")
    with pytest.raises(DataError, match=r"line 2: not valid UTF-8"):
        read_tsv(path)


def test_tsv_ignores_the_attribution_column(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("Hi.\tHallo!\tCC-BY 2.0 (France) Attribution: tatoeba.org\n", encoding="utf-8")
    assert read_tsv(path) == ([("Hi.", "Hallo!")], 0)


def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNVIZ_DATA", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_data_dir() == tmp_path / "env"
    monkeypatch.delenv("ATTNVIZ_DATA")
    assert resolve_data_dir() == default_data_dir() and default_data_dir().parts[-2:] == ("attnviz", "data")


def test_missing_files_name_what_is_expected_and_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as err:
        load_splits(CorpusSpec("multi30k", "fr", "en"), tmp_path)
    assert "multi30k_train.fr.gz" in str(err.value) and "Download the multi30k corpus" in str(err.value)
    assert "--" not in str(err.value)  # the engine speaks of settings; each front end adds its own controls
    assert err.value.corpus == "multi30k" and err.value.settings == ("data_dir",)
    from attnviz.cli.main import explain

    assert "attnviz data download multi30k" in explain(err.value) and "--data-dir" in explain(err.value)


@pytest.mark.data
def test_reference_b_filter_and_split(data_dir):
    spec = CorpusSpec("tatoeba", "fr", "en", file="eng-fra.txt", eng_prefixes=True, max_words=10)
    splits = load_splits(spec, data_dir)
    assert (len(splits.train), len(splits.val)) == (8479, 2120)
    assert all(len(s.split()) < 12 for s, _ in splits.train[:200])
    assert load_splits(spec, data_dir).val == splits.val  # the seeded split is stable


@pytest.mark.data
def test_multi30k_splits_and_direction(data_dir):
    splits = load_splits(CorpusSpec("multi30k", "de", "en"), data_dir)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (29000, 1014, 1000)
    assert splits.test[0][1].startswith("A man")
    tatoeba_en_de = load_splits(CorpusSpec("tatoeba", "en", "de", file="deu.txt", max_words=10, limit=5), data_dir)
    assert len(tatoeba_en_de.train) == 5


# -- download against a local server ------------------------------------------------------------------------------


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves files from ``root`` and honours ``Range: bytes=N-`` as a real file server would."""

    def __init__(self, *args, root, **kwargs):
        self.root = root
        super().__init__(*args, **kwargs)

    def do_GET(self):
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        if start >= len(data) and start:
            self.send_error(416)
            return
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])

    def log_message(self, *args):
        pass


@pytest.fixture()
def mirror(tmp_path, data_dir):
    """A folder laid out like the origins (remote file names), served on 127.0.0.1."""
    root = tmp_path / "mirror"
    root.mkdir()
    for remote in dl.SOURCES["multi30k"][1]:
        shutil.copy(data_dir / remote.local, root / remote.url.rsplit("/", 1)[1])
    with zipfile.ZipFile(root / "data.zip", "w") as archive:
        archive.write(data_dir / "eng-fra.txt", "data/eng-fra.txt")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(RangeHandler, root=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()


@pytest.mark.data
def test_download_fetches_verifies_and_skips_what_is_there(mirror, tmp_path, data_dir):
    url, _ = mirror
    target = tmp_path / "data"
    events = list(dl.download("multi30k", target, mirror=url))
    assert sum(e.finished for e in events) == 9 and any(not e.finished and e.done > 0 for e in events)
    assert (target / "multi30k_train.de.gz").read_bytes() == (data_dir / "multi30k_train.de.gz").read_bytes()
    assert not list(target.glob("*.part"))
    again = list(dl.download("multi30k", target, mirror=url))
    assert all(e.skipped for e in again) and len(again) == 9
    list(dl.download("tatoeba-fra", target, mirror=url))
    assert dl.sha256_of(target / "eng-fra.txt") == dl.sha256_of(data_dir / "eng-fra.txt")


@pytest.mark.data
def test_download_resumes_a_partial_file(mirror, tmp_path):
    url, root = mirror
    target = tmp_path / "data"
    target.mkdir()
    full = (root / "train.de.gz").read_bytes()
    (target / "train.de.gz.part").write_bytes(full[:100_000])
    events = [e for e in dl.download("multi30k", target, mirror=url) if e.file == "multi30k_train.de.gz"]
    assert events[0].done > 100_000 and events[0].done - 100_000 <= 1 << 16  # continued, not restarted
    assert (target / "multi30k_train.de.gz").read_bytes() == full


@pytest.mark.data
def test_download_refuses_a_damaged_file(mirror, tmp_path):
    url, root = mirror
    (root / "val.en.gz").write_bytes(b"corrupted")
    with pytest.raises(DataError, match="multi30k_val.en.gz: checksum mismatch"):
        list(dl.download("multi30k", tmp_path / "data", mirror=url))
    assert not (tmp_path / "data" / "multi30k_val.en.gz").exists()


def test_download_reports_an_unreachable_server(tmp_path):
    with pytest.raises(DataError, match="cannot reach"):
        list(dl.download("names", tmp_path, mirror="http://127.0.0.1:9", timeout=2))
