"""Fetching the public corpora into the data folder: resumable, verified against known SHA-256 sums.

``download(name, data_dir)`` is a generator of ``DownloadProgress`` events. Each file goes to ``<name>.part`` first
and continues with an HTTP Range request if a part is already there; a finished file is checked against its known
checksum before it takes its final name, so the data folder never holds a wrong or half-written corpus. A mirror
(``mirror=`` or ``ATTNVIZ_MIRROR``) replaces every origin URL by ``<mirror>/<remote file name>``.

Failures keep what arrived: a dropped connection, a reset or a stall (no data for ``timeout`` seconds) leaves the
``.part`` file in place and says how far it got, so running the command again resumes it. Only a transfer that
completed and still fails its checksum, or a server that sends more than the file's known size, has its part
removed. What is downloaded is bounded by each file's known size (an upper bound for archives), so a lying or
endless server cannot fill the disk. A bad URL, an HTTP error, a data folder that is a file or is not writable:
each gives one ``DataError`` saying what to do.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attnviz.engine.errors import DataError

MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/data/task1/raw/"
DEFAULT_LIMIT = 200 * 1024 * 1024
_MULTI30K_SIZES = {"train.de.gz": 637044, "train.en.gz": 568929, "val.de.gz": 24681, "val.en.gz": 21650,
                   "test_2016_flickr.de.gz": 22890, "test_2016_flickr.en.gz": 21077, "train.fr.gz": 604242,
                   "val.fr.gz": 23001, "test_2016_flickr.fr.gz": 22310}
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
    size: int = 0  # the exact size of the remote file, when known
    bound: int = 0  # otherwise an upper bound of it (archives: their member's size plus what else they hold)

    @property
    def limit(self) -> int:
        return self.size or self.bound or DEFAULT_LIMIT


SOURCES: dict[str, tuple[str, list[RemoteFile]]] = {
    "multi30k": ("Multi30k task 1 German/English/French, raw (official repository); research and education use",
                 [RemoteFile(MULTI30K + name, "multi30k_" + name, digest, size=_MULTI30K_SIZES[name])
                  for name, digest in _MULTI30K_SUMS.items()]),
    "tatoeba-fra": ("Tatoeba English-French pairs (PyTorch tutorial archive), "
                    "CC BY 2.0 FR: tatoeba.org, manythings.org",
                    [RemoteFile("https://download.pytorch.org/tutorial/data.zip", "eng-fra.txt",
                                "6b0f3decdb78600485b58efb541f5a2ab69ba888742ac04180e013084e40de7c", "data/eng-fra.txt",
                                bound=2 * 9_541_158 + (4 << 20))]),
    "tatoeba-deu": ("Tatoeba English-German pairs (manythings.org release 2018-05-13), CC BY 2.0 FR",
                    [RemoteFile("https://raw.githubusercontent.com/rioyshky/translation/"
                                "de48b7027f7318d77010a6e08ed928c10748c23d/deu-eng.zip", "deu.txt",
                                "a79c90b3cd3102decffa49cc00fb6f20023974f2ae5c4782515bebe133fcc07b", "deu.txt",
                                bound=2 * 12_316_220 + (4 << 20))]),
    "names": ("names.txt, 32,032 first names (karpathy/makemore), MIT",
              [RemoteFile("https://raw.githubusercontent.com/karpathy/makemore/"
                          "988aa59e4d8fefa526d06f3b453ad116258398d4/names.txt", "names.txt",
                          "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d", size=228_145)]),
}


@dataclass(frozen=True)
class DownloadProgress:
    file: str
    done: int  # bytes received so far
    total: int  # 0 when the server does not say
    finished: bool = False
    skipped: bool = False  # already present and verified
    resumed_from: int = 0  # bytes of a partial file that this attempt continues


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open(url: str, have: int, timeout: float, mirror: str | None):
    """The HTTP response for ``url`` from byte ``have`` on; None when the server says nothing is left."""
    if not url.lower().startswith(("http://", "https://")):
        raise DataError(f"{url} is not an http(s) address; give --mirror as http(s)://host/folder.")
    try:
        request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to send: the part is complete
            return None
        hint = " Check the --mirror address." if mirror else ""
        raise DataError(f"downloading {url} failed: HTTP {exc.code} {exc.reason}.{hint}") from None
    except ValueError:  # urllib's "unknown url type" or a malformed host
        raise DataError(f"{url} is not an http(s) address; give --mirror as http(s)://host/folder.") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        if isinstance(getattr(exc, "reason", exc), TimeoutError):
            raise DataError(f"{url} did not answer within {timeout:g} s; try again later, or use --mirror.") from None
        raise DataError(f"cannot reach {url} ({getattr(exc, 'reason', exc)}). Check the network connection, or "
                        "copy the files into the data folder by hand.") from None


def _fetch(url: str, part: Path, remote: RemoteFile, timeout: float, mirror: str | None = None
           ) -> Iterator[tuple[int, int]]:
    """Stream ``url`` into ``part``, continuing a partial file; yields (done, total). A cut transfer keeps the part
    and raises ``DataError`` saying how far it got."""
    have = part.stat().st_size if part.exists() else 0
    if remote.size and have == remote.size:
        yield have, have
        return
    if have > remote.limit:
        part.unlink()  # longer than the file can be: not a prefix of it
        have = 0
    response = _open(url, have, timeout, mirror)
    if response is None:
        yield have, have
        return
    with response:
        resumed = response.status == 206  # a server that ignores Range sends the whole file again
        done = have if resumed else 0
        length = int(response.headers.get("Content-Length") or 0)
        total = done + length if length else remote.size
        if total > remote.limit:
            raise DataError(f"{url} announces {total:,} bytes, but {remote.local} is known to be "
                            f"{'exactly' if remote.size else 'at most'} {remote.limit:,}; refusing it (a wrong "
                            "file or a wrong mirror).")
        try:
            out = open(part, "ab" if resumed else "wb")  # noqa: SIM115 (closed below, also on errors)
        except OSError as exc:
            raise _cannot_write(part, exc) from None
        with out:
            yield from _stream(response, out, url, part, remote, done, total, timeout)


def _cannot_write(part: Path, exc: OSError) -> DataError:
    return DataError(f"cannot write {part} ({exc.strerror}); free some space, or choose another data folder.")


def _stream(response, out, url: str, part: Path, remote: RemoteFile, done: int, total: int, timeout: float
            ) -> Iterator[tuple[int, int]]:
    kept = f"the partial file {part.name} is kept: run the same command again to resume"
    while True:
        try:
            block = response.read(1 << 16)
        except TimeoutError:
            raise DataError(f"downloading {remote.local} stalled: no data for {timeout:g} s after {done:,} "
                            f"bytes; {kept}.") from None
        except (OSError, http.client.HTTPException) as exc:
            raise DataError(f"the connection was dropped while downloading {remote.local} after {done:,} of "
                            f"{total:,} bytes ({type(exc).__name__}); {kept}.") from None
        if not block:
            break
        if done + len(block) > remote.limit:
            out.close()
            part.unlink(missing_ok=True)
            raise DataError(f"{url} sent more than the {remote.limit:,} bytes {remote.local} can have; the "
                            "partial file was removed. Check the mirror.")
        try:
            out.write(block)
        except OSError as exc:
            raise _cannot_write(part, exc) from None
        done += len(block)
        yield done, total
    if total and done < total:
        raise DataError(f"the connection was dropped while downloading {remote.local} after {done:,} of "
                        f"{total:,} bytes; {kept}.")


def _prepare_folder(data_dir: Path) -> None:
    """The data folder exists and can be written, or one message saying why not."""
    if data_dir.exists() and not data_dir.is_dir():
        raise DataError(f"the data folder {data_dir} is a file, not a folder; choose another --data-dir or "
                        "ATTNVIZ_DATA.")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create the data folder {data_dir} ({exc.strerror}); choose another --data-dir "
                        "or ATTNVIZ_DATA.") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise DataError(f"the data folder {data_dir} is not writable; fix its permissions or choose another "
                        "--data-dir or ATTNVIZ_DATA.")


def download(name: str, data_dir: str | os.PathLike, mirror: str | None = None, timeout: float = 30.0
             ) -> Iterator[DownloadProgress]:
    if name not in SOURCES:
        raise DataError(f"unknown corpus {name!r}; available: {', '.join(SOURCES)}")
    data_dir = Path(data_dir)
    _prepare_folder(data_dir)
    mirror = mirror or os.environ.get("ATTNVIZ_MIRROR")
    for remote in SOURCES[name][1]:
        target = data_dir / remote.local
        if target.exists() and sha256_of(target) == remote.sha256:
            yield DownloadProgress(remote.local, target.stat().st_size, target.stat().st_size, True, True)
            continue
        url = f"{mirror.rstrip('/')}/{remote.url.rsplit('/', 1)[1]}" if mirror else remote.url
        part = data_dir / (remote.url.rsplit("/", 1)[1] + ".part")
        have = part.stat().st_size if part.exists() else 0
        done = total = 0
        for done, total in _fetch(url, part, remote, timeout, mirror):
            yield DownloadProgress(remote.local, done, total, resumed_from=have)
        _install(part, target, remote)
        yield DownloadProgress(remote.local, done, total, finished=True)

def _install(part: Path, target: Path, remote: RemoteFile) -> None:
    """Verify (extracting the member of an archive first) and move into place."""
    source = part
    if remote.member:
        source = target.with_name(target.name + ".extract")
        try:
            with zipfile.ZipFile(part) as archive, archive.open(remote.member) as member, open(source, "wb") as out:
                while block := member.read(1 << 20):
                    out.write(block)
        except (zipfile.BadZipFile, KeyError, EOFError, zlib.error) as exc:
            source.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
            raise DataError(f"{remote.url} did not give a usable archive ({exc}); run the download again.") from None
        except OSError as exc:  # no .extract is left behind; the complete archive is kept for the next run
            source.unlink(missing_ok=True)
            raise DataError(f"cannot extract {remote.member} into {target.parent} ({exc.strerror}); free some "
                            "space, then run the download again.") from None
    digest = sha256_of(source)
    if digest != remote.sha256:
        source.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
        raise DataError(f"{remote.local}: checksum mismatch (got {digest[:12]}..., expected {remote.sha256[:12]}...); "
                        "the download was damaged or the source changed. The partial file was removed; try again.")
    os.replace(source, target)
    part.unlink(missing_ok=True)
