"""store.recordings: a sweep's recording is its compressed log, else its plain one."""

from __future__ import annotations

from pathlib import Path

from tunebox.store.recordings import recording_in, shipped_recording


def test_the_compressed_recording_first_then_the_plain_one(tmp_path: Path) -> None:
    assert recording_in(tmp_path, "s") == tmp_path / "s.jsonl.gz"  # neither: the name a message gives
    (tmp_path / "s.jsonl").write_text("")
    assert recording_in(tmp_path, "s") == tmp_path / "s.jsonl"
    (tmp_path / "s.jsonl.gz").write_bytes(b"")
    assert recording_in(tmp_path, "s") == tmp_path / "s.jsonl.gz"


def test_a_sweep_files_recording_is_in_the_results_beside_its_folder(tmp_path: Path) -> None:
    (tmp_path / "spaces").mkdir()
    sweep = tmp_path / "spaces" / "s.toml"
    assert shipped_recording(sweep, "s") == tmp_path / "results" / "recordings" / "s.jsonl.gz"
