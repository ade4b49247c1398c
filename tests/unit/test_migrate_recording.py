"""scripts/migrate_recording.py --add-field: a template's new parameter given the value its recorded
configurations ran with, in recordings and winners databases; idempotent; a value outside the space
refused with nothing written."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "migrate_recording.py"
RECORDING = REPO / "results" / "recordings" / "quant_gemm.jsonl.gz"
WINNERS = REPO / "results" / "winners.sqlite"
ADD = ("--add-field", "quant_gemm", "decode", "second_factor")


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO)


def shipped_lines() -> list[str]:
    return gzip.decompress(RECORDING.read_bytes()).decode().splitlines()


def without_field(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "second_factor"}


def decode_rows(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT config_json, record_json FROM winners WHERE family = 'quant_gemm'"
            ' AND config_json LIKE \'%"template": "decode"%\' ORDER BY problem_key'
        ).fetchall()


def test_a_recording_regains_the_field_once(tmp_path: Path) -> None:
    """Recorded decode configurations with the field taken out get it back (as ``branch``); other
    templates' and the header line stay; a second run changes nothing."""
    records = [json.loads(line) for line in shipped_lines()[:200]]
    decode = [r for r in records if r.get("config", {}).get("template") == "decode"]
    assert decode and len(decode) < len(records) - 1
    for record in records:
        if "config" in record:
            record["config"] = without_field(record["config"])
    path = tmp_path / "old.jsonl.gz"  # compressed, as the shipped recordings are
    path.write_bytes(gzip.compress("".join(json.dumps(record) + "\n" for record in records).encode()))
    done = migrate(*ADD, "branch", str(path))
    assert done.returncode == 0, done.stderr
    for record in decode:
        record["config"]["second_factor"] = "branch"
    assert [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()] == records
    again = migrate(*ADD, "branch", str(path))
    assert again.returncode == 0 and "0 configurations" in again.stdout, again.stderr


def test_a_winners_database_regains_the_field(tmp_path: Path) -> None:
    """The shipped decode winners with the field taken out: each gets it back, as ``branch``."""
    db = tmp_path / "winners.sqlite"
    shutil.copy(WINNERS, db)
    shipped = decode_rows(db)
    assert shipped
    expected = []
    with sqlite3.connect(db) as connection:
        for config_json, record_json in shipped:
            config, record = without_field(json.loads(config_json)), json.loads(record_json)
            record["config"] = config
            expected.append(
                ({**config, "second_factor": "branch"}, {**record, "config": {**config, "second_factor": "branch"}})
            )
            connection.execute(
                "UPDATE winners SET config_json = ?, record_json = ? WHERE config_json = ? AND record_json = ?",
                (json.dumps(config, sort_keys=True), json.dumps(record), config_json, record_json),
            )
    done = migrate(*ADD, "branch", str(db))
    assert done.returncode == 0, done.stderr
    assert [(json.loads(c), json.loads(r)) for c, r in decode_rows(db)] == expected


def test_a_value_outside_the_space_is_refused(tmp_path: Path) -> None:
    line = next(line for line in shipped_lines() if '"template": "decode"' in line)
    record = json.loads(line)
    record["config"] = without_field(record["config"])
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(record) + "\n")
    before = path.read_text()
    refused = migrate(*ADD, "sometimes", str(path))
    assert refused.returncode != 0 and "not in the space" in refused.stderr
    assert path.read_text() == before
