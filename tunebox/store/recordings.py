"""Recorded sweeps, what the replay backend answers from: ``results/recordings/<sweep name>.jsonl.gz``,
an evaluation log (``evallog``) compressed with gzip (about a tenth of its size: the shipped recordings
must leave a checkout small enough to upload to a GPU host). A plain ``.jsonl`` log is read too."""

from __future__ import annotations

from pathlib import Path

COMPRESSED = ".jsonl.gz"
PLAIN = ".jsonl"


def recording_in(folder: Path, name: str) -> Path:
    """Sweep ``name``'s recording in ``folder``: the compressed file, else the plain one; where neither
    exists, the compressed path (the one to name in a message)."""
    compressed, plain = folder / f"{name}{COMPRESSED}", folder / f"{name}{PLAIN}"
    return plain if plain.exists() and not compressed.exists() else compressed


def shipped_recording(sweep_file: Path, name: str) -> Path:
    """The recording shipped beside a sweep file (``<repo>/spaces/<file>.toml``): in
    ``<repo>/results/recordings/``."""
    return recording_in(sweep_file.resolve().parent.parent / "results" / "recordings", name)
