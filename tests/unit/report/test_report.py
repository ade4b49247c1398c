"""Report frames and rendering on a synthetic evaluation log (no GPU needed)."""

from __future__ import annotations

import math
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tunebox.records import DeviceInfo, EvalRecord, Status, Timing, canonical_json
from tunebox.report import ReportInputs, build_report
from tunebox.report.data import NO_VALID, evaluations_frame, history_frame, status_frame, winners_frame

FAMILY = "tile_copy"
DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
SMALL = {"n": 1024}
LARGE = {"n": 4096}
DEFAULT = {"tile": 64, "vec": 1}
EVIL = "<script>alert(1)</script>"
GB = 10**9


def _rec(problem: dict, config: dict, status: Status = Status.OK, samples: tuple[float, ...] = (),
         baseline: str = "", message: str = "", replayed: bool = True, family: str = FAMILY) -> EvalRecord:
    return EvalRecord(family=family, problem=problem, config=config, status=status, message=message,
                      timing=Timing(samples) if samples else None, bytes_moved=GB, device=DEVICE,
                      replayed=replayed, baseline=baseline)


def _records(replayed: bool = True) -> tuple[EvalRecord, ...]:
    return (
        _rec(SMALL, DEFAULT, samples=(2.0, 2.1, 1.9), replayed=replayed),
        _rec(SMALL, {"tile": 128, "vec": 4}, samples=(0.5, 0.5, 0.5), replayed=replayed),
        _rec(LARGE, {"tile": 64, "vec": 1}, Status.RUNTIME_ERROR, message="illegal address",
             replayed=replayed),
        _rec(SMALL, {"tile": 256, "vec": 8}, Status.COMPILE_ERROR, message="nvrtc: bad | thing",
             replayed=replayed),
        _rec(SMALL, {"tile": 32, "vec": 2}, samples=(1.0,), replayed=replayed),
        _rec(LARGE, {"tile": 9, "vec": 1}, Status.INVALID, message="tile must divide n", replayed=replayed),
        _rec(SMALL, {}, samples=(0.9,), baseline="cupy: b[...] = a", replayed=replayed),
        _rec(SMALL, {}, samples=(0.8,), baseline="torch: b.copy_(a)", replayed=replayed),
        _rec({"m": 1}, {"x": 1}, samples=(0.1,), family="other_family"),
    )


def _inputs(records: tuple[EvalRecord, ...] | None = None, **kwargs: object) -> ReportInputs:
    return ReportInputs(
        family=FAMILY, records=_records() if records is None else records,
        default_configs={canonical_json(SMALL): DEFAULT, canonical_json(LARGE): DEFAULT},
        problem_names={canonical_json(SMALL): "copy 1K", canonical_json(LARGE): EVIL}, **kwargs)


def test_evaluations_frame_has_one_row_per_family_record_in_order() -> None:
    frame = evaluations_frame(_inputs())
    assert list(frame["trial"]) == list(range(8))  # the other family's record is ignored
    assert frame.loc[0, "name"] == "copy 1K" and frame.loc[2, "name"] == EVIL
    assert frame.loc[0, "median_ms"] == 2.0
    assert frame.loc[1, "bandwidth_gbps"] == pytest.approx(2000.0)
    assert math.isnan(frame.loc[2, "median_ms"]) and math.isnan(frame.loc[2, "noise"])
    assert frame.loc[7, "baseline"] == "torch: b.copy_(a)" and frame["replayed"].all()
    assert frame.loc[1, "config"] == "tile=128 vec=4"


def test_winners_frame_numbers() -> None:
    winners = winners_frame(_inputs()).set_index("problem_key")
    small = winners.loc[canonical_json(SMALL)]
    assert small["config"] == "tile=128 vec=4" and small["trial"] == 1
    assert small["median_ms"] == 0.5
    assert small["speedup_vs_default"] == 2.0 / 0.5
    assert small["speedup_vs_baseline"] == 0.8 / 0.5
    assert small["baseline"] == "torch: b.copy_(a)"
    assert small["bandwidth_gbps"] == pytest.approx(2000.0)
    assert small["copy_fraction"] == pytest.approx(2000.0 / 4250.0)
    assert (small["variants"], small["ok"], small["compile_error"]) == (4, 3, 1)

    large = winners.loc[canonical_json(LARGE)]
    assert large["config"] == NO_VALID and large["baseline"] == ""
    assert math.isnan(large["median_ms"]) and math.isnan(large["speedup_vs_default"])
    assert math.isnan(large["speedup_vs_baseline"])
    assert (large["variants"], large["ok"], large["runtime_error"], large["invalid"]) == (2, 0, 1, 1)


def test_winners_frame_without_default_or_baseline_gives_nan() -> None:
    records = tuple(r for r in _records() if not r.baseline and r.config != DEFAULT)
    small = winners_frame(_inputs(records, copy_limit_gbps=1000.0)).iloc[0]
    assert small["median_ms"] == 0.5 and small["copy_fraction"] == pytest.approx(2.0)
    assert math.isnan(small["speedup_vs_default"]) and math.isnan(small["speedup_vs_baseline"])


def test_status_frame_counts_variants_per_problem_and_status() -> None:
    frame = status_frame(_inputs())
    got = {(r["name"], r["status"]): (r["count"], r["example"]) for r in frame.to_dict("records")}
    assert got == {
        ("copy 1K", "ok"): (3, ""),
        ("copy 1K", "compile_error"): (1, "nvrtc: bad | thing"),
        (EVIL, "invalid"): (1, "tile must divide n"),
        (EVIL, "runtime_error"): (1, "illegal address"),
    }


def test_history_frame_tracks_best_so_far() -> None:
    history = history_frame(_inputs())
    small = history[history["name"] == "copy 1K"]
    assert list(small["problem_trial"]) == [0, 1, 2, 3]
    assert list(small["trial"]) == [0, 1, 3, 4]
    assert list(small["best_ms"]) == [2.0, 0.5, 0.5, 0.5]
    assert math.isnan(small["median_ms"].iloc[2])
    assert history[history["name"] == EVIL]["best_ms"].isna().all()


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_build_report_writes_self_contained_html_markdown_and_pngs(tmp_path: Path) -> None:
    files = build_report(_inputs(), tmp_path / "out", f"Tile copy {EVIL}")
    assert files.html == tmp_path / "out" / "tile_copy.html"
    assert [p.name for p in files.images] == ["tile_copy_history.png", "tile_copy_bandwidth.png",
                                              "tile_copy_speedup.png"]
    for image in files.images:
        assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    page = files.html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count('src="data:image/png;base64,iVBORw0KGgo') == 3
    assert "tile=128 vec=4" in page and NO_VALID in page and "torch: b.copy_(a)" in page
    assert "NVIDIA H200" in page and "replayed from a recorded GPU sweep" in page
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags and parser.tags.count("img") == 3 and "table" in parser.tags

    markdown = files.markdown.read_text(encoding="utf-8")
    assert "![Optimization history](tile_copy_history.png)" in markdown
    assert "(tile_copy_speedup.png)" in markdown and "base64" not in markdown
    assert "| copy 1K | tile=128 vec=4 | 0.5 |" in markdown
    assert "nvrtc: bad \\| thing" in markdown and EVIL not in markdown


def test_build_report_without_speedup_data_omits_the_plot(tmp_path: Path) -> None:
    (tmp_path / "tile_copy_speedup.png").write_bytes(b"stale")
    records = tuple(r for r in _records(replayed=False) if not r.baseline)
    inputs = ReportInputs(FAMILY, records, default_configs={}, problem_names={})
    files = build_report(inputs, tmp_path, "no speed-ups")
    assert len(files.images) == 2 and not (tmp_path / "tile_copy_speedup.png").exists()
    page = files.html.read_text(encoding="utf-8")
    assert "No speed-up plot" in page and "measurements were taken live" in page
    assert "n=1024" in page  # unnamed problems are shown as k=v pairs
    assert "speedup" not in files.markdown.read_text(encoding="utf-8")


def test_empty_log_raises_a_clear_error(tmp_path: Path) -> None:
    message = "no evaluations to report: run a sweep first"
    for records in ((), tuple(r for r in _records() if r.family != FAMILY)):
        inputs = _inputs(records)
        with pytest.raises(ValueError, match=message):
            build_report(inputs, tmp_path, "empty")
        with pytest.raises(ValueError, match=message):
            winners_frame(inputs)
    assert not list(tmp_path.iterdir())


def test_unsafe_family_name_and_bad_copy_limit_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="file name"):
        build_report(ReportInputs("../evil", _records(), {}, {}), tmp_path, "x")
    with pytest.raises(ValueError, match="copy_limit_gbps"):
        ReportInputs(FAMILY, _records(), {}, {}, copy_limit_gbps=0.0)


def test_import_is_light() -> None:
    code = "import sys, tunebox.report; print('pandas' in sys.modules or 'matplotlib' in sys.modules)"
    repo = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "False"
