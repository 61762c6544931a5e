"""The downloader against a local server on 127.0.0.1 that drops, stalls, resets, lies and 404s: partial files are
kept and resumed with Range, sizes are bounded, every failure is one DataError saying what happened."""

import hashlib
import http.server
import os
import socket
import struct
import threading
import time

import pytest

from attnviz.cli.main import main
from attnviz.engine.corpus import download as dl
from attnviz.engine.errors import DataError

CONTENT = bytes(range(256)) * 1024  # 256 KiB, several read blocks
DIGEST = hashlib.sha256(CONTENT).hexdigest()


class Hostile(http.server.BaseHTTPRequestHandler):
    """``/<mode>/toy.bin``; modes: good, drop (first answer cut in half), stall, reset, short (says and sends
    half), big (announces more than the known size), endless (no length, never ends), norange (ignores Range)."""

    calls: dict = {}

    def do_GET(self):
        mode = self.path.strip("/").split("/")[0]
        n = Hostile.calls[mode] = Hostile.calls.get(mode, 0) + 1
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        if mode == "missing":
            self.send_error(404)
            return
        if mode == "norange":
            start = 0
        body = CONTENT[start:]
        self.send_response(206 if start else 200)
        if mode == "endless":
            self.end_headers()
            while True:
                self.wfile.write(CONTENT)
        announced = {"big": 10 * len(CONTENT), "short": len(body) // 2}.get(mode, len(body))
        self.send_header("Content-Length", str(announced))
        self.end_headers()
        if mode == "short":
            body = body[:announced]
        if mode in ("drop", "stall", "reset") and n == 1:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            if mode == "stall":
                time.sleep(2)
            if mode == "reset":  # RST instead of FIN
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server(monkeypatch):
    Hostile.calls = {}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    remote = dl.RemoteFile("https://origin.invalid/toy.bin", "toy.bin", DIGEST, size=len(CONTENT))
    monkeypatch.setitem(dl.SOURCES, "toy", ("a test file", [remote]))
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def fetch(base, mode, target, timeout=5.0):
    return list(dl.download("toy", target, mirror=f"{base}/{mode}", timeout=timeout))


@pytest.mark.parametrize("mode, words", [("drop", "connection was dropped .* after 131,072 of 262,144 bytes"),
                                         ("reset", "connection was dropped"),
                                         ("stall", "stalled: no data for 0.5 s after 131,072 bytes")])
def test_a_cut_transfer_keeps_its_part_and_the_next_run_resumes_it(server, tmp_path, mode, words):
    with pytest.raises(DataError, match=words + ".*partial file toy.bin.part is kept"):
        fetch(server, mode, tmp_path, timeout=0.5)
    part = tmp_path / "toy.bin.part"
    assert part.exists() and 0 < part.stat().st_size < len(CONTENT)
    have = part.stat().st_size
    events = fetch(server, mode, tmp_path)
    assert events[0].resumed_from == have and events[0].done - have <= 1 << 16  # continued, not restarted
    assert (tmp_path / "toy.bin").read_bytes() == CONTENT and not part.exists()


def test_a_404_names_the_address_and_the_mirror(server, tmp_path):
    with pytest.raises(DataError, match=r"missing/toy.bin failed: HTTP 404 .*Check the --mirror address"):
        fetch(server, "missing", tmp_path)


def test_a_server_that_announces_too_much_is_refused_before_downloading(server, tmp_path):
    with pytest.raises(DataError, match=r"announces 2,621,440 bytes, but toy.bin is known to be exactly 262,144"):
        fetch(server, "big", tmp_path)
    assert not (tmp_path / "toy.bin.part").exists()


def test_an_endless_server_is_cut_at_the_known_size(server, tmp_path):
    with pytest.raises(DataError, match="sent more than the 262,144 bytes toy.bin can have"):
        fetch(server, "endless", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_lies_short_fails_the_checksum_and_keeps_nothing_wrong(server, tmp_path):
    with pytest.raises(DataError, match="toy.bin: checksum mismatch"):
        fetch(server, "short", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_ignores_range_restarts_the_file(server, tmp_path):
    (tmp_path / "toy.bin.part").write_bytes(CONTENT[:1000])
    fetch(server, "norange", tmp_path)
    assert (tmp_path / "toy.bin").read_bytes() == CONTENT


def test_a_part_longer_than_the_file_is_discarded(server, tmp_path):
    (tmp_path / "toy.bin.part").write_bytes(CONTENT + b"junk")
    fetch(server, "good", tmp_path)
    assert (tmp_path / "toy.bin").read_bytes() == CONTENT


@pytest.mark.parametrize("mirror, words", [("example.org/files", "is not an http\\(s\\) address"),
                                           ("http://127.0.0.1:9", "cannot reach")])
def test_bad_mirror_addresses(tmp_path, mirror, words):
    with pytest.raises(DataError, match=words):
        list(dl.download("names", tmp_path, mirror=mirror, timeout=2))


def test_a_data_folder_that_is_a_file_or_not_writable(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "data"
    afile.write_text("x")
    assert main(["data", "download", "names", "--data-dir", str(afile)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err
    folder = tmp_path / "ro"
    folder.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(folder))  # root ignores chmod
    with pytest.raises(DataError, match="is not writable"):
        list(dl.download("names", folder))
    with pytest.raises(DataError, match="cannot create the data folder"):
        list(dl.download("names", afile / "below"))


def test_a_broken_archive_leaves_no_files_behind(server, tmp_path, monkeypatch):
    remote = dl.RemoteFile("https://origin.invalid/toy.bin", "toy.txt", DIGEST, member="toy.txt", bound=1 << 20)
    monkeypatch.setitem(dl.SOURCES, "toy", ("not really a zip", [remote]))
    with pytest.raises(DataError, match="did not give a usable archive"):
        fetch(server, "good", tmp_path)
    assert list(tmp_path.iterdir()) == []
