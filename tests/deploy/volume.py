"""A ConfigMap volume laid out the way the kubelet writes it, so the gateway can be pointed at one.

The kubelet's atomic writer keeps each version in a timestamped directory, points the ``..data``
symlink at the current one and exposes every key as a symlink through ``..data``; an update writes a new
directory and renames a fresh symlink over ``..data``, so readers see the old file or the new one, never
half of one. (A ``subPath`` mount binds the file itself and never sees an update.)
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path


class ConfigMapVolume:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._version = 0

    def write(self, data: Mapping[str, str]) -> None:
        """Publish ``data`` (key -> file content) as the volume's new contents, atomically."""
        self._version += 1
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
        version_dir = self.directory / f"..{stamp}.{os.getpid()}{self._version:09d}"
        version_dir.mkdir()
        for key, content in data.items():
            (version_dir / key).write_text(content, encoding="utf-8")
            version_dir.joinpath(key).chmod(0o644)
        link = self.directory / "..data"
        previous = link.resolve() if link.is_symlink() else None
        staging = self.directory / "..data_tmp"
        staging.symlink_to(version_dir.name)
        staging.replace(link)
        for key in data:
            visible = self.directory / key
            if not visible.is_symlink():
                visible.symlink_to(Path("..data") / key)
        if previous is not None:
            shutil.rmtree(previous)
