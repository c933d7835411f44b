"""Running a document's code blocks as a reader would, so that the docs cannot drift from the code.

The blocks run in order, in a directory laid out like a checkout (``bin/run``, ``deploy/``, ``.venv``), where
the document's own command starts ``./bin/run --mock-upstream`` with its embedded Redis (a real server, in the
directory's ``.gateway-data``, as a reader's would be). What a block is for comes from its fence and the
marker right above it:

- ``sh``: run by bash (``set -e``) in one session: what a block exports, the next one has;
- ``sh`` under ``<!-- docs-test: terminal 1 -->``: the gateway's start, left running in the background;
- ``python``: run by the session's ``python``, from stdin;
- ``text``: what the block before it prints (a start block: what the gateway prints by the time it answers);
  each line must match a line, ``…`` stands for any text, and a line of ``…`` alone for any lines;
- ``yaml`` under ``<!-- docs-test: add to gateway.yaml -->``: merged into gateway.yaml, the edit the reader
  makes (mappings merged key by key, anything else replaced);
- any block under ``<!-- docs-test: not run -->``: left alone (a test of its own checks it).

Any other block fails the test: a block nobody runs could drift. The one difference from a reader's run is
the port: the gateway listens on a free one, and ``127.0.0.1:8080`` in the blocks is read as that one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.processes import wait_until_up

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_ADDRESS = "127.0.0.1:8080"
BLOCK = re.compile(
    r"(?:<!-- docs-test: (?P<marker>[^>]+?) -->\n)?```(?P<fence>\w*)\n(?P<code>.*?)^```", re.M | re.S
)
KNOWN = {
    ("sh", None),
    ("sh", "terminal 1"),
    ("python", None),
    ("text", None),
    ("yaml", "add to gateway.yaml"),
    *((fence, "not run") for fence in ("sh", "python", "text", "yaml")),
}
FROM_THE_SHELL = ("GATEWAY_", "OPENAI_", "ANTHROPIC_", "DEFAULT_TENANT_KEY", "VIRTUAL_ENV")
"""Variables of the developer's shell that would change what a document does."""
BLOCK_SECONDS = 60


@dataclass(frozen=True)
class Block:
    fence: str
    marker: str | None
    code: str
    where: str
    """``file:line`` of its first line, for messages."""


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [
        Block(
            m["fence"], m["marker"], m["code"], f"{path.name}:{text.count(chr(10), 0, m.start('code')) + 1}"
        )
        for m in BLOCK.finditer(text)
    ]


def unknown(found: list[Block]) -> list[str]:
    """The blocks no rule covers."""
    return [f"{b.where}: {b.fence} {b.marker}" for b in found if (b.fence, b.marker) not in KNOWN]


def matches(expected: str, output: str) -> bool:
    """Whether ``output`` reads as ``expected``: ``…`` any text in a line, a line of ``…`` any lines."""
    pattern = "".join(
        r"(?:.*\n)*" if line == "…" else ".*".join(map(re.escape, line.split("…"))) + r"\n"
        for line in expected.splitlines()
    )
    return re.fullmatch(pattern, output + "\n") is not None


def merge(base: Any, change: Any) -> Any:
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{key: merge(base.get(key), value) for key, value in change.items()}}
    return change


def checkout(root: Path) -> Path:
    """A directory laid out like a checkout, as ``./bin/run`` and the docs expect: the real ``bin/run``,
    ``deploy/`` and the test run's virtualenv, already installed (``bin/setup`` must not run)."""
    (root / "bin").mkdir()
    shutil.copy2(ROOT / "bin" / "run", root / "bin" / "run")
    (root / "bin" / "setup").write_text("#!/usr/bin/env sh\necho 'bin/setup ran' >&2\nexit 1\n")
    (root / "bin" / "setup").chmod(0o755)
    (root / "deploy").symlink_to(ROOT / "deploy")
    (root / "pyproject.toml").write_text("[project]\nname = 'llm-cost-gateway'\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    (root / ".venv" / ".installed").touch()
    return root


class Session:
    """The reader's second terminal: one environment, carried from block to block."""

    def __init__(self, cwd: Path, port: int) -> None:
        self.cwd, self.port = cwd, port
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(FROM_THE_SHELL)}
        self.gateway: subprocess.Popen[bytes] | None = None
        self.gateway_log = cwd / "terminal-1.log"

    def run(self, block: Block) -> str:
        code = block.code.replace(DOCUMENTED_ADDRESS, f"127.0.0.1:{self.port}")
        if block.fence == "python":
            python = shutil.which("python", path=self.env.get("PATH")) or sys.executable
            return self._run([python, "-"], code, block)
        saved = self.cwd / ".session-env"
        script = f'set -eo pipefail\n{code}\nenv -0 > "{saved}"\n'
        output = self._run(["bash", "-c", script], None, block)
        self.env = dict(item.split("=", 1) for item in saved.read_text().split("\0") if "=" in item)
        return output

    def _run(self, args: list[str], stdin: str | None, block: Block) -> str:
        done = subprocess.run(
            args,
            input=stdin,
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_SECONDS,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{block.where}: exit status {done.returncode}\n{output}"
        return output

    def start(self, block: Block) -> str:
        env = {**self.env, "GATEWAY_PORT": str(self.port)}
        with self.gateway_log.open("wb") as log:
            self.gateway = subprocess.Popen(
                ["bash", "-c", block.code],
                cwd=self.cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_until_up(f"http://127.0.0.1:{self.port}/healthz", self.gateway, timeout=BLOCK_SECONDS)
        except RuntimeError as exc:
            raise AssertionError(f"{block.where}: {exc}\n{self.gateway_log.read_text()}") from exc
        return self.gateway_log.read_text().replace(f"127.0.0.1:{self.port}", DOCUMENTED_ADDRESS)

    def stop(self) -> None:
        if self.gateway is None or self.gateway.poll() is not None:
            return
        os.killpg(self.gateway.pid, signal.SIGTERM)
        try:
            self.gateway.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.gateway.pid, signal.SIGKILL)
            self.gateway.wait()


def run_document(session: Session, found: list[Block]) -> None:
    """Every block in order: run, merged, or compared with what the block before it printed."""
    output: str | None = None
    for block in found:
        assert (block.fence, block.marker) in KNOWN, f"{block.where}: no rule for this block"
        if block.marker == "not run":
            continue
        if block.fence == "text":
            assert output is not None, f"{block.where}: output of no command"
            expected = block.code.rstrip("\n")
            assert matches(expected, output.rstrip("\n")), (
                f"{block.where}: the output differs\n--- documented\n{expected}\n--- printed\n{output}"
            )
            output = None
        elif block.fence == "yaml":
            path = session.cwd / "gateway.yaml"
            edited = merge(yaml.safe_load(path.read_text()), yaml.safe_load(block.code))
            path.write_text(yaml.safe_dump(edited, sort_keys=False))
            output = None
        elif block.marker == "terminal 1":
            output = session.start(block)
        else:
            output = session.run(block)
