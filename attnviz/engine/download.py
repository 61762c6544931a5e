"""Fetching the public corpora into the data folder: resumable, verified against known SHA-256 sums.

``download(name, data_dir)`` is a generator of ``DownloadProgress`` events. Each file goes to ``<name>.part`` first
and continues with an HTTP Range request if a part is already there; a finished file is checked against its known
checksum before it takes its final name, so the data folder never holds a wrong or half-written corpus. A mirror
(``mirror=`` or ``ATTNVIZ_MIRROR``) replaces every origin URL by ``<mirror>/<remote file name>``.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.errors import DataError

MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/"
_MULTI30K_SUMS = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}


@dataclass(frozen=True)
class RemoteFile:
    url: str
    local: str  # name in the data folder
    sha256: str  # of the local file (of the extracted member for archives)
    member: str = ""  # for zip archives: the member to extract


SOURCES: dict[str, tuple[str, list[RemoteFile]]] = {
    "multi30k": ("Multi30k task 1 German/English/French, raw (official repository); research and education use",
                 [RemoteFile(MULTI30K + name, "multi30k_" + name, digest) for name, digest in _MULTI30K_SUMS.items()]),
    "tatoeba-fra": ("Tatoeba English-French pairs (PyTorch tutorial archive), CC BY 2.0 FR: tatoeba.org, manythings.org",
                    [RemoteFile("https://download.pytorch.org/tutorial/data.zip", "eng-fra.txt",
                                "6b0f3decdb78600485b58efb541f5a2ab69ba888742ac04180e013084e40de7c", "data/eng-fra.txt")]),
    "tatoeba-deu": ("Tatoeba English-German pairs (manythings.org release 2018-05-13), CC BY 2.0 FR",
                    [RemoteFile("https://raw.githubusercontent.com/rioyshky/translation/"
                                "de48b7027f7318d77010a6e08ed928c10748c23d/deu-eng.zip", "deu.txt",
                                "a79c90b3cd3102decffa49cc00fb6f20023974f2ae5c4782515bebe133fcc07b", "deu.txt")]),
    "names": ("names.txt, 32,032 first names (karpathy/makemore), MIT",
              [RemoteFile("https://raw.githubusercontent.com/karpathy/makemore/"
                          "988aa59e4d8fefa526d06f3b453ad116258398d4/names.txt", "names.txt",
                          "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d")]),
}


@dataclass(frozen=True)
class DownloadProgress:
    file: str
    done: int  # bytes received so far
    total: int  # 0 when the server does not say
    finished: bool = False
    skipped: bool = False  # already present and verified


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(url: str, part: Path, timeout: float) -> Iterator[tuple[int, int]]:
    """Stream ``url`` into ``part``, continuing a partial file; yields (done, total)."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to send: the part is complete
            yield have, have
            return
        raise DataError(f"downloading {url} failed: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(f"cannot reach {url} ({getattr(exc, 'reason', exc)}). Check the network connection, or "
                        "copy the files into the data folder by hand.") from None
    with response:
        resumed = response.status == 206
        done = have if resumed else 0
        length = int(response.headers.get("Content-Length") or 0)
        total = done + length if length else 0
        with open(part, "ab" if resumed else "wb") as out:
            while block := response.read(1 << 16):
                out.write(block)
                done += len(block)
                yield done, total


def download(name: str, data_dir: str | os.PathLike, mirror: str | None = None, timeout: float = 30.0
             ) -> Iterator[DownloadProgress]:
    if name not in SOURCES:
        raise DataError(f"unknown corpus {name!r}; available: {', '.join(SOURCES)}")
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    mirror = mirror or os.environ.get("ATTNVIZ_MIRROR")
    for remote in SOURCES[name][1]:
        target = data_dir / remote.local
        if target.exists() and sha256_of(target) == remote.sha256:
            yield DownloadProgress(remote.local, target.stat().st_size, target.stat().st_size, True, True)
            continue
        url = f"{mirror.rstrip('/')}/{remote.url.rsplit('/', 1)[1]}" if mirror else remote.url
        part = data_dir / (remote.url.rsplit("/", 1)[1] + ".part")
        done = total = 0
        for done, total in _fetch(url, part, timeout):
            yield DownloadProgress(remote.local, done, total)
        _install(part, target, remote)
        yield DownloadProgress(remote.local, done, total, finished=True)


def _install(part: Path, target: Path, remote: RemoteFile) -> None:
    """Verify (extracting the member of an archive first) and move into place."""
    source = part
    if remote.member:
        try:
            with zipfile.ZipFile(part) as archive, archive.open(remote.member) as member:
                source = target.with_name(target.name + ".extract")
                with open(source, "wb") as out:
                    while block := member.read(1 << 20):
                        out.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            part.unlink(missing_ok=True)
            raise DataError(f"{remote.url} did not give a usable archive ({exc}); run the download again.") from None
    digest = sha256_of(source)
    if digest != remote.sha256:
        source.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
        raise DataError(f"{remote.local}: checksum mismatch (got {digest[:12]}..., expected {remote.sha256[:12]}...); "
                        "the download was damaged or the source changed. The partial file was removed; try again.")
    os.replace(source, target)
    part.unlink(missing_ok=True)
