"""The needle of a probe (a unique fact and the question about it), its scoring, and ``ProbeResult``.

The fact is an access code nobody could guess (``7342-QXV-5518``) for a named archive; the answer counts
as a recall when it contains the code, ignoring case, spaces and punctuation. Results keep numbers only:
neither the haystack, nor the question, nor the answer is stored.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

_NAMES = (
    "amber", "basalt", "cobalt", "cedar", "copper", "delta", "ember", "falcon", "garnet", "harbor",
    "indigo", "juniper", "kestrel", "lagoon", "marble", "nimbus", "onyx", "orchid", "pewter", "quartz",
    "raven", "saffron", "summit", "tundra", "umber", "velvet", "willow", "zephyr",
)  # fmt: skip
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_NOT_ALNUM = re.compile(r"[^0-9A-Z]")


@dataclass(frozen=True, slots=True)
class Needle:
    archive: str
    code: str

    @property
    def fact(self) -> str:
        return f"The access code for the {self.archive} archive is {self.code}."

    @property
    def question(self) -> str:
        return (
            f"What is the access code for the {self.archive} archive? "
            "Answer with the code only, exactly as it appears in the document."
        )

    def recalled(self, answer: str) -> bool:
        return _normal(self.code) in _normal(answer)


def make_needle(rng: random.Random) -> Needle:
    archive = f"{rng.choice(_NAMES)}-{rng.choice(_NAMES)}"
    letters = "".join(rng.choice(_LETTERS) for _ in range(3))
    code = f"{rng.randrange(1000, 10000)}-{letters}-{rng.randrange(1000, 10000)}"
    return Needle(archive=archive, code=code)


def _normal(text: str) -> str:
    return _NOT_ALNUM.sub("", text.upper())


@dataclass(frozen=True, slots=True)
class ProbeResult:
    time: float
    run_id: str
    request_id: str
    model: str
    length: int
    """The haystack length asked for, in tokens (the row of the recall table)."""
    depth: float
    repeat: int
    prompt_tokens: int
    """The prompt's tokens as counted before sending (the bucket of the behaviour map)."""
    recalled: bool
    status: int
    latency: float | None
    error: str | None = None
    """An error class or status line, never the answer."""

    @property
    def answered(self) -> bool:
        """The probe got an answer to score (errors are not misses: they are counted apart)."""
        return self.error is None and 200 <= self.status < 300

    def to_fields(self) -> dict[str, str]:
        out = {}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value is None:
                out[name] = ""
            elif isinstance(value, bool):
                out[name] = "1" if value else "0"
            else:
                out[name] = str(value)
        return out

    @classmethod
    def from_fields(cls, raw: Mapping[bytes | str, bytes | str]) -> ProbeResult:
        data = {_text(key): _text(value) for key, value in raw.items()}
        latency = data.get("latency")
        return cls(
            time=float(data["time"]),
            run_id=data.get("run_id", ""),
            request_id=data.get("request_id", ""),
            model=data["model"],
            length=int(data["length"]),
            depth=float(data["depth"]),
            repeat=int(data.get("repeat") or 0),
            prompt_tokens=int(data["prompt_tokens"]),
            recalled=data.get("recalled") == "1",
            status=int(data.get("status") or 0),
            latency=float(latency) if latency else None,
            error=data.get("error") or None,
        )


_FIELD_NAMES = tuple(field.name for field in fields(ProbeResult))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
