"""Report frames and rendering on synthetic evaluation logs (no GPU needed): a data-movement family
(tile_copy: GB/s against the copy limit) and an arithmetic one (gemm: TFLOP/s against the bf16 peak, on
a roofline); the results DataFrame of the Python API."""

from __future__ import annotations

import dataclasses
import html
import math
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import tunebox
from tunebox.errors import DatabaseError, SpaceError
from tunebox.limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from tunebox.records import DeviceInfo, EvalRecord, Status, Timing, canonical_json
from tunebox.report import ReportInputs, build_report, results_frame
from tunebox.report.data import (
    BASELINE,
    NO_VALID,
    RESULT_COLUMNS,
    RETIMED,
    SCREENED,
    evaluations_frame,
    history_frame,
    outcomes_frame,
    status_frame,
    winners_frame,
)
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep

FAMILY = "tile_copy"
DEVICE = DeviceInfo("NVIDIA H200", "9.0", "13000", "13.0")
SMALL = {"n": 1024}
LARGE = {"n": 4096}
DEFAULT = {"tile": 64, "vec": 1}
EVIL = "<script>alert(1)</script>"
GB = 10**9


def _rec(
    problem: dict[str, Any],
    config: dict[str, Any],
    status: Status = Status.OK,
    samples: tuple[float, ...] = (),
    baseline: str = "",
    message: str = "",
    replayed: bool = True,
    family: str = FAMILY,
    phase: str = "screen",
    flops: int = 0,
    bytes_moved: int = GB,
) -> EvalRecord:
    return EvalRecord(
        family=family,
        problem=problem,
        config=config,
        status=status,
        message=message,
        timing=Timing(samples) if samples else None,
        bytes_moved=bytes_moved,
        flops=flops,
        device=DEVICE,
        replayed=replayed,
        baseline=baseline,
        phase=phase,
    )


def _records(replayed: bool = True) -> tuple[EvalRecord, ...]:
    return (
        _rec(SMALL, DEFAULT, samples=(2.0, 2.1, 1.9), replayed=replayed),
        _rec(SMALL, {"tile": 128, "vec": 4}, samples=(0.5, 0.5, 0.5), replayed=replayed),
        _rec(LARGE, {"tile": 64, "vec": 1}, Status.RUNTIME_ERROR, message="illegal address", replayed=replayed),
        _rec(SMALL, {"tile": 256, "vec": 8}, Status.COMPILE_ERROR, message="nvrtc: bad | thing", replayed=replayed),
        _rec(SMALL, {"tile": 32, "vec": 2}, samples=(1.0,), replayed=replayed),
        _rec(LARGE, {"tile": 9, "vec": 1}, Status.INVALID, message="tile must divide n", replayed=replayed),
        _rec(SMALL, {}, samples=(0.9,), baseline="cupy: b[...] = a", replayed=replayed),
        _rec(SMALL, {}, samples=(0.8,), baseline="torch: b.copy_(a)", replayed=replayed),
        _rec({"m": 1}, {"x": 1}, samples=(0.1,), family="other_family"),
    )


def _inputs(records: tuple[EvalRecord, ...] | None = None, **kwargs: Any) -> ReportInputs:
    return ReportInputs(
        family=FAMILY,
        records=_records() if records is None else records,
        default_configs={canonical_json(SMALL): DEFAULT, canonical_json(LARGE): DEFAULT},
        problem_names={canonical_json(SMALL): "copy 1K", canonical_json(LARGE): EVIL},
        **kwargs,
    )


def _through_log(records: tuple[EvalRecord, ...], path: Path) -> tuple[EvalRecord, ...]:
    """The records written to an evaluation log and read back, as a report reads them."""
    log = EvalLog(path)
    for record in records:
        log.append(record)
    return tuple(log.read())


# -- gemm: an arithmetic family with templates, every failure status, finalists and baselines ---------

GEMM = "gemm"
RAGGED = {"M": 1023, "N": 1025, "K": 1024}
CUBE = {"M": 1024, "N": 1024, "K": 1024}
SKINNY = {"M": 16, "N": 16, "K": 16}
MMA = {"template": "mma", "BM": 64, "BN": 64, "BK": 32, "warps_m": 2}
WGMMA = {"template": "wgmma", "BM": 128, "BN": 256, "consumers": 2}
FAILING = {  # status -> (problem, config, message); every non-ok status a variant can log
    Status.COMPILE_ERROR: (
        CUBE,
        {"template": "mma", "BM": 256, "BN": 256, "BK": 64, "warps_m": 4},
        "error: too many resources",
    ),
    Status.RESOURCE_ERROR: (
        CUBE,
        {"template": "wgmma", "BM": 256, "BN": 256, "consumers": 2},
        "shared memory 262144 > 232448",
    ),
    Status.RUNTIME_ERROR: (RAGGED, {"template": "wgmma", "BM": 64, "BN": 64, "consumers": 1}, "illegal memory access"),
    Status.TIMEOUT: (RAGGED, {"template": "mma", "BM": 128, "BN": 64, "BK": 32, "warps_m": 1}, "kernel hung: killed"),
    Status.WRONG_RESULT: (
        RAGGED,
        {"template": "mma", "BM": 64, "BN": 128, "BK": 64, "warps_m": 1},
        "output D differs from the reference",
    ),
    Status.INVALID: (SKINNY, {"template": "wgmma", "BM": 64, "BN": 64, "consumers": 1}, "M too small"),
}


def _work(problem: dict[str, int]) -> tuple[int, int]:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return 2 * m * n * k, 2 * (m * k + k * n + m * n)  # flops, bytes of bf16 A, B and D


def _g(
    problem: dict[str, int],
    config: dict[str, Any],
    status: Status = Status.OK,
    samples: tuple[float, ...] = (),
    **kwargs: Any,
) -> EvalRecord:
    flops, moved = _work(problem)
    return _rec(problem, config, status, samples, family=GEMM, flops=flops, bytes_moved=moved, replayed=False, **kwargs)


def _gemm_records() -> tuple[EvalRecord, ...]:
    ok = [
        _g(CUBE, MMA, samples=(0.05,)),
        _g(CUBE, WGMMA, samples=(0.01, 0.0101, 0.0099)),
        _g(RAGGED, MMA, samples=(0.2,)),
        _g(RAGGED, WGMMA, samples=(0.1,)),
        _g(SKINNY, MMA, samples=(0.004,)),
    ]
    failing = [_g(p, c, status, message=m) for status, (p, c, m) in FAILING.items()]
    finals = [
        _g(CUBE, WGMMA, samples=(0.0105,), phase="final"),
        _g(CUBE, MMA, samples=(0.06,), phase="final"),
        _g(CUBE, {}, samples=(0.02,), phase="final", baseline="torch: torch.matmul(A, B)"),
        _g(RAGGED, WGMMA, samples=(0.11,), phase="final"),
        _g(
            RAGGED,
            {},
            Status.WRONG_RESULT,
            phase="final",
            baseline="torch: torch.matmul(A, B)",
            message="torch: output D differs from the reference: 385884 elements beyond the tolerance",
        ),
    ]
    return (*ok[:3], *failing[:3], *ok[3:], *failing[3:], *finals)


GEMM_NAMES = {
    canonical_json(CUBE): "cube_1024",
    canonical_json(RAGGED): "ragged_1023x1025x1024",
    canonical_json(SKINNY): "tiny_16",
}


def _gemm_inputs(tmp_path: Path, records: tuple[EvalRecord, ...] | None = None) -> ReportInputs:
    logged = _through_log(_gemm_records() if records is None else records, tmp_path / "gemm_evals.jsonl")
    return ReportInputs(GEMM, logged, {canonical_json(CUBE): dict(MMA)}, GEMM_NAMES)


def _md_section(markdown: str, title: str) -> str:
    """The text of one ``## title`` section of a Markdown report."""
    start = markdown.index(f"## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:] if end < 0 else markdown[start:end]


def _md_rows(section: str) -> list[dict[str, str]]:
    """The first table of a Markdown section, as one dict per row keyed by the headers."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[2:]]


def _header_variants(markdown: str) -> int:
    found = re.search(r"(\d+) variant\(s\) evaluated", markdown)
    assert found, "the header states the variant count"
    return int(found.group(1))


# -- frames -----------------------------------------------------------------------------------------


def test_evaluations_frame_has_one_row_per_family_record_in_order() -> None:
    frame = evaluations_frame(_inputs())
    assert list(frame["trial"]) == list(range(8))  # the other family's record is ignored
    assert frame.loc[0, "name"] == "copy 1K" and frame.loc[2, "name"] == EVIL
    assert frame.loc[0, "median_ms"] == 2.0
    assert frame.loc[1, "bandwidth_gbps"] == pytest.approx(2000.0)
    assert math.isnan(frame.loc[1, "tflops"]) and math.isnan(frame.loc[1, "intensity"])
    assert math.isnan(frame.loc[2, "median_ms"]) and math.isnan(frame.loc[2, "noise"])
    assert frame.loc[7, "baseline"] == "torch: b.copy_(a)" and frame["replayed"].all()
    assert frame.loc[1, "config"] == "tile=128 vec=4" and frame.loc[1, "template"] == ""
    assert list(frame["kind"]) == [SCREENED] * 6 + [BASELINE] * 2


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
    assert math.isnan(small["tflops"]) and math.isnan(small["peak_fraction"])
    assert (small["variants"], small["ok"], small["compile_error"]) == (4, 3, 1)

    large = winners.loc[canonical_json(LARGE)]
    assert large["config"] == NO_VALID and large["baseline"] == ""
    assert math.isnan(large["median_ms"]) and math.isnan(large["speedup_vs_default"])
    assert math.isnan(large["speedup_vs_baseline"])
    assert (large["variants"], large["ok"], large["runtime_error"], large["invalid"]) == (2, 0, 1, 1)


def test_the_default_is_compared_as_the_winner_was_timed() -> None:
    """Its screening median over the winner's re-timing read 0.98x where the winner was the default."""
    finals = (
        _rec(SMALL, DEFAULT, samples=(0.6,), phase="final"),
        _rec(SMALL, {"tile": 128, "vec": 4}, samples=(0.55,), phase="final"),
    )
    small = winners_frame(_inputs((*_records(), *finals))).set_index("problem_key").loc[canonical_json(SMALL)]
    assert small["median_ms"] == 0.55 and small["default_ms"] == 0.6
    alone = winners_frame(_inputs((*_records(), finals[0]))).set_index("problem_key").loc[canonical_json(SMALL)]
    assert alone["config"] == "tile=64 vec=1" and alone["speedup_vs_default"] == 1.0


def test_winners_frame_without_default_or_baseline_gives_nan() -> None:
    records = tuple(r for r in _records() if not r.baseline and r.config != DEFAULT)
    small = winners_frame(_inputs(records, copy_limit_gbps=1000.0)).iloc[0]
    assert small["median_ms"] == 0.5 and small["copy_fraction"] == pytest.approx(2.0)
    assert math.isnan(small["speedup_vs_default"]) and math.isnan(small["speedup_vs_baseline"])


def test_status_frame_lists_every_failure_and_no_ok_row() -> None:
    frame = status_frame(_inputs())
    got = {
        (r["name"], r["kind"], r["status"]): (r["count"], r["example_config"], r["example"])
        for r in frame.to_dict("records")
    }
    assert got == {
        ("copy 1K", SCREENED, "compile_error"): (1, "tile=256 vec=8", "nvrtc: bad | thing"),
        (EVIL, SCREENED, "invalid"): (1, "tile=9 vec=1", "tile must divide n"),
        (EVIL, SCREENED, "runtime_error"): (1, "tile=64 vec=1", "illegal address"),
    }


def test_status_frame_counts_failed_baselines_and_finalists(tmp_path: Path) -> None:
    """The old table kept screened variants only (and their ``ok`` rows): a log whose one failure is a
    library baseline's wrong result in the final phase (the recorded gemm sweep) showed nothing but ok."""
    frame = status_frame(_gemm_inputs(tmp_path))
    assert Status.OK.value not in set(frame["status"])
    assert set(frame["status"]) == {s.value for s in FAILING}
    baseline = frame[frame["kind"] == BASELINE].iloc[0]
    assert (baseline["name"], baseline["status"], baseline["count"]) == ("ragged_1023x1025x1024", "wrong_result", 1)
    assert baseline["example_config"] == "torch: torch.matmul(A, B)"
    assert baseline["example"].startswith("torch: output D differs")
    wrong = frame[(frame["kind"] == SCREENED) & (frame["status"] == "wrong_result")].iloc[0]
    assert wrong["example_config"] == "mma BK=64 BM=64 BN=128 warps_m=1"  # template, then the config
    assert int(frame["count"].sum()) == len(FAILING) + 1


def test_outcomes_frame_counts_every_status_by_kind(tmp_path: Path) -> None:
    frame = outcomes_frame(_gemm_inputs(tmp_path)).set_index("status")
    assert list(frame.columns) == [SCREENED, RETIMED, BASELINE, "total"]
    unlogged = {Status.HARNESS_ERROR, Status.SANITIZER_ERROR}  # a sweep stops; finalists only (phase sanitize)
    assert list(frame.index) == [s.value for s in Status if s not in unlogged]
    assert list(frame.loc["ok"]) == [5, 3, 1, 9]
    assert list(frame.loc["wrong_result"]) == [1, 0, 1, 2]
    assert int(frame["total"].sum()) == len(_gemm_records())


def test_gemm_winners_in_tflops_against_the_bf16_peak(tmp_path: Path) -> None:
    inputs = _gemm_inputs(tmp_path)
    assert inputs.arithmetic and not _inputs().arithmetic
    winners = winners_frame(inputs).set_index("name")
    cube = winners.loc["cube_1024"]
    flops, moved = _work(CUBE)
    # the winner is the fastest finalist re-timing (0.0105 ms), not the screening (0.01 ms)
    assert (cube["template"], cube["config"], cube["median_ms"]) == ("wgmma", "BM=128 BN=256 consumers=2", 0.0105)
    assert cube["tflops"] == pytest.approx(flops / 0.0105e9)
    assert cube["peak_fraction"] == pytest.approx(flops / 0.0105e9 / BF16_TENSOR_TFLOPS)
    assert cube["intensity"] == pytest.approx(flops / moved)
    assert cube["speedup_vs_default"] == pytest.approx(0.06 / 0.0105)  # the default's re-timing, as the winner's
    assert cube["speedup_vs_baseline"] == pytest.approx(0.02 / 0.0105)
    assert (cube["variants"], cube["ok"], cube["compile_error"], cube["resource_error"]) == (4, 2, 1, 1)
    ragged = winners.loc["ragged_1023x1025x1024"]
    assert ragged["baseline"] == "" and math.isnan(ragged["speedup_vs_baseline"])  # its one baseline failed
    tiny = winners.loc["tiny_16"]
    assert (tiny["variants"], tiny["ok"], tiny["invalid"]) == (2, 1, 1)


def test_history_frame_tracks_best_so_far() -> None:
    history = history_frame(_inputs())
    small = history[history["name"] == "copy 1K"]
    assert list(small["problem_trial"]) == [0, 1, 2, 3]
    assert list(small["trial"]) == [0, 1, 3, 4]
    assert list(small["best_ms"]) == [2.0, 0.5, 0.5, 0.5]
    assert math.isnan(small["median_ms"].iloc[2])
    assert history[history["name"] == EVIL]["best_ms"].isna().all()


# -- rendered reports -------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_build_report_writes_self_contained_html_markdown_and_pngs(tmp_path: Path) -> None:
    files = build_report(_inputs(), tmp_path / "out", f"Tile copy {EVIL}")
    assert files.html == tmp_path / "out" / "tile_copy.html"
    assert [p.name for p in files.images] == [
        "tile_copy_history.png",
        "tile_copy_bandwidth.png",
        "tile_copy_speedup.png",
    ]
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


def test_data_movement_report_in_gbps_of_the_copy_limit(tmp_path: Path) -> None:
    inputs = _inputs(_through_log(_records(), tmp_path / "evals.jsonl"))
    files = build_report(inputs, tmp_path / "out", "tile copy")
    markdown = files.markdown.read_text(encoding="utf-8")
    page = files.html.read_text(encoding="utf-8")
    for text in (markdown, page):
        assert "% of copy limit" in text and f"copy limit of {COPY_LIMIT_GBPS:,.0f} GB/s" in text
        assert "TFLOP/s" not in text and "bf16" not in text and "roofline" not in text.lower()
    winners = _md_rows(_md_section(markdown, "Winners"))
    assert "Template" not in winners[0]  # no configuration names a template
    small = next(w for w in winners if w["Problem"] == "copy 1K")
    assert (small["GB/s"], small["% of copy limit"]) == ("2,000", "47.1%")
    # counts: the header's variants are the table's (baselines are not variants)
    assert _header_variants(markdown) == sum(int(w["Variants"]) for w in winners) == 6
    assert "2 library baseline timing(s)" in markdown
    failed = _md_rows(_md_section(markdown, "What failed and why"))
    assert {(r["Status"], r["Count"]) for r in failed} == {
        ("compile_error", "1"),
        ("runtime_error", "1"),
        ("invalid", "1"),
    }
    assert not (tmp_path / "out" / "tile_copy_roofline.png").exists()


def test_gemm_report_in_tflops_with_a_roofline(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "gemm_bandwidth.png").write_bytes(b"stale")  # an older report's bandwidth plot
    files = build_report(_gemm_inputs(tmp_path), out, "gemm")
    assert [p.name for p in files.images] == ["gemm_history.png", "gemm_roofline.png", "gemm_speedup.png"]
    assert (out / "gemm_roofline.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert not (out / "gemm_bandwidth.png").exists()

    markdown = files.markdown.read_text(encoding="utf-8")
    page = files.html.read_text(encoding="utf-8")
    for text in (markdown, page):
        assert "TFLOP/s" in text and "% of bf16 peak" in text and f"{BF16_TENSOR_TFLOPS:,.0f} TFLOP/s" in text
        assert "roofline" in text.lower() and "arithmetic intensity" in text
        # no GB/s-of-copy-limit claim: the copy limit appears only as the roofline's ceiling
        assert "% of copy limit" not in text and "of limit" not in text and "Winner bandwidth" not in text
    assert page.count('src="data:image/png;base64,iVBORw0KGgo') == 3

    winners = {w["Problem"]: w for w in _md_rows(_md_section(markdown, "Winners"))}
    assert "GB/s" not in next(iter(winners.values()))
    cube = winners["cube_1024"]
    flops, moved = _work(CUBE)
    assert cube["Template"] == "wgmma" and cube["Best config"] == "BM=128 BN=256 consumers=2"
    assert cube["TFLOP/s"] == f"{flops / 0.0105e9:.4g}"
    assert cube["% of bf16 peak"] == f"{flops / 0.0105e9 / BF16_TENSOR_TFLOPS:.1%}"
    assert cube["FLOP/byte"] == f"{flops / moved:,.0f}"
    assert winners["tiny_16"]["% of bf16 peak"].endswith("%")
    assert "template=" not in _md_section(markdown, "Winners")

    # counts: 5 ok + 6 failed screened variants; finalist re-timings and baselines are not variants
    assert _header_variants(markdown) == sum(int(w["Variants"]) for w in winners.values()) == 11
    assert "3 finalist re-timing(s), 2 library baseline timing(s); 16 evaluation(s) in all" in markdown

    # every non-ok status, with counts and examples; never an ok row
    failed = _md_rows(_md_section(markdown, "What failed and why"))
    assert {r["Status"] for r in failed} == {s.value for s in FAILING}
    assert all(r["Count"] == "1" and r["Example message"] != "—" for r in failed)
    assert any(r["Kind"] == BASELINE and r["Status"] == "wrong_result" for r in failed)
    assert "7 of 16 evaluation(s) did not end ok" in markdown
    for status, (_, _, message) in FAILING.items():
        assert f"<td>{status.value}</td>" in page and html.escape(message) in page
    outcomes = {r["Status"]: r for r in _md_rows(_md_section(markdown, "Outcomes by status"))}
    assert outcomes["ok"]["Total"] == "9" and outcomes["wrong_result"]["Library baselines"] == "1"

    # the files it wrote, listed in both pages
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(p.name for p in files.all)
    listed = _md_section(markdown, "Files written")
    assert all(f"`{name}`" in listed and f"<code>{name}</code>" in page for name in written)


def test_a_log_without_failures_says_nothing_failed(tmp_path: Path) -> None:
    records = tuple(r for r in _gemm_records() if r.status is Status.OK)
    markdown = build_report(_gemm_inputs(tmp_path, records), tmp_path / "out", "gemm").markdown.read_text()
    section = _md_section(markdown, "What failed and why")
    assert "Nothing failed: all 9 evaluation(s) ended ok." in section and "|" not in section


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


def test_unsafe_family_name_and_bad_limits_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="file name"):
        build_report(ReportInputs("../evil", _records(), {}, {}), tmp_path, "x")
    with pytest.raises(ValueError, match="copy_limit_gbps"):
        ReportInputs(FAMILY, _records(), {}, {}, copy_limit_gbps=0.0)
    with pytest.raises(ValueError, match="tensor_peak_tflops"):
        ReportInputs(FAMILY, _records(), {}, {}, tensor_peak_tflops=math.inf)


def test_import_is_light() -> None:
    code = (
        "import sys, tunebox.report, tunebox.results_frame; "
        "print('pandas' in sys.modules or 'matplotlib' in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "False"


# -- the results DataFrame ----------------------------------------------------------------------------


def test_results_frame_one_row_per_evaluation_with_parameter_columns(tmp_path: Path) -> None:
    records = (*_gemm_records(), *_records())
    log = tmp_path / "evals.jsonl"
    _through_log(records, log)
    frame = tunebox.results(log)
    assert len(frame) == len(records) == 25
    params = ["BK", "BM", "BN", "warps_m", "consumers", "tile", "vec", "x"]  # a logged config's keys are sorted
    fixed = list(RESULT_COLUMNS)
    assert sorted(frame.columns) == sorted([*fixed, *params])
    assert list(frame.columns[:5]) == ["trial", "family", "problem", "problem_key", "template"]
    assert list(frame.columns[5 : 5 + len(params)]) == params  # in order of first appearance
    for column in (
        "status",
        "median_ms",
        "noise",
        "bandwidth_gbps",
        "tflops",
        "phase",
        "baseline",
        "device",
        "replayed",
    ):
        assert column in frame.columns
    assert list(frame["trial"]) == list(range(25))
    assert list(frame["family"].value_counts().sort_index().items()) == [
        ("gemm", 16),
        ("other_family", 1),
        ("tile_copy", 8),
    ]

    first = frame.iloc[0]
    flops, moved = _work(CUBE)
    assert (first["template"], first["BM"], first["BK"], first["status"]) == ("mma", 64, 32, "ok")
    assert first["tflops"] == pytest.approx(flops / 0.05e9)
    assert first["bandwidth_gbps"] == pytest.approx(moved / 0.05e6)
    assert first["device"] == "NVIDIA H200" and not first["replayed"] and first["phase"] == "screen"
    assert first["problem"] == "K=1024 M=1024 N=1024"  # a log alone has no problem names
    assert first["problem_key"] == canonical_json(CUBE) and first["config"] == "BK=32 BM=64 BN=64 warps_m=2"
    assert frame["consumers"].isna().iloc[0] and frame["BK"].isna().sum() > 0  # a parameter of one template
    assert str(frame["BM"].dtype) == "Int64"

    gemm = frame[frame["family"] == "gemm"]
    assert gemm["tflops"].notna().sum() == 9 and (gemm["status"] != "ok").sum() == 7
    assert set(gemm["phase"]) == {"screen", "final"} and (gemm["baseline"] != "").sum() == 2
    copies = frame[frame["family"] == "tile_copy"]
    assert copies["tflops"].isna().all() and (copies["template"] == "").all()
    assert copies["bandwidth_gbps"].iloc[1] == pytest.approx(2000.0)


def test_results_frame_renames_parameters_that_shadow_columns() -> None:
    frame = results_frame([_rec(SMALL, {"status": "on", "tile": 8}, samples=(1.0,))])
    assert frame.loc[0, "status"] == "ok" and frame.loc[0, "param_status"] == "on"
    empty = results_frame([])
    assert list(empty.columns) == list(RESULT_COLUMNS) and empty.empty


def test_results_from_a_sweep_file_and_its_output_directory(sweep_file: Path, recording: Path, tmp_path: Path) -> None:
    results = tmp_path / "r"
    with pytest.raises(SpaceError, match="no evaluation log"):
        tunebox.results(sweep_file, results=results)
    replayed = results / "sweeps" / "small-replay"
    replayed.mkdir(parents=True)
    (replayed / "evals.jsonl").write_bytes(recording.read_bytes())
    frame = tunebox.results(sweep_file, results=results)
    assert len(frame) == len(EvalLog(recording).read())
    assert set(frame["problem"]) == {"copy", "transpose"}  # named as in the sweep file
    assert (frame.loc[frame["baseline"] == "", "template"] == "vector").all() and "threads" in frame.columns
    assert len(tunebox.results(replayed)) == len(frame)

    live = results / "sweeps" / "small"  # a live GPU sweep is preferred, unless replay=True
    live.mkdir()
    _through_log(_records()[:2], live / "evals.jsonl")
    assert len(tunebox.results(str(sweep_file), results=str(results))) == 2
    assert len(tunebox.results(sweep_file, results=results, replay=True)) == len(frame)


def test_the_clocks_section_says_when_no_timing_carries_observations(tmp_path: Path) -> None:
    markdown = build_report(_gemm_inputs(tmp_path), tmp_path / "out", "gemm").markdown.read_text(encoding="utf-8")
    assert "No timing here carries clock observations" in _md_section(markdown, "Clocks while timing")


def test_the_clocks_section_shows_the_winners_medians_and_the_flagged_timings(tmp_path: Path) -> None:
    from tunebox.records import Clocks, ClockSample

    cool, hot = ClockSample(1980, 3201, 40, 300.0, 0), ClockSample(1100, 3201, 90, 700.0, 0x40)
    records = [
        dataclasses.replace(r, timing=Timing(r.timing.samples_ms, Clocks((cool, cool, hot))))
        if r.timing and r.config == WGMMA and r.problem == CUBE and r.phase == "final"
        else r
        for r in _gemm_records()
    ]
    records.append(dataclasses.replace(_g(CUBE, MMA), timing=Timing((0.07,), Clocks((hot, hot), 2, True))))
    markdown = build_report(_gemm_inputs(tmp_path, tuple(records)), tmp_path / "out", "gemm").markdown.read_text(
        encoding="utf-8"
    )
    section = _md_section(markdown, "Clocks while timing")
    rows = {r["Problem"]: r for r in _md_rows(section)}
    cube = rows[GEMM_NAMES[canonical_json(CUBE)]]
    assert (cube["SM clock (MHz)"], cube["Temperature (°C)"], cube["Power (W)"]) == ("1980", "40", "300")
    assert (cube["Timings observed"], cube["Batches re-taken"], cube["Flagged"]) == ("2", "2", "1")
    assert "1 timing(s) throttled in every batch and were kept, flagged" in section


COVERAGE = "Coverage: the problems the winners database answers exactly"


def test_the_coverage_section_lists_the_databases_problems(tmp_path: Path) -> None:
    from tunebox.runtime.coverage import Covered

    tuned = Covered(FAMILY, "NVIDIA H200", {"n": 1024}, 0.5, "torch: copy_", 1.0, False, False, True)
    raced = Covered(FAMILY, "NVIDIA H200", {"n": 77}, 0.2, None, None, True, False, False)
    markdown = build_report(_inputs(coverage=(tuned, raced)), tmp_path / "out", "t").markdown.read_text("utf-8")
    section = _md_section(markdown, COVERAGE)
    rows = _md_rows(section)
    assert [r["Problem"] for r in rows] == ["n=1024", "n=77"]
    assert (rows[0]["× library"], rows[0]["Tuned by"], rows[0]["Current"]) == ("2.00×", "sweep", "yes")
    assert (rows[1]["Library"], rows[1]["Tuned by"]) == ("not timed", "first-use race")
    assert rows[1]["Current"].startswith("stale") and "2 tuned problem(s), 1 stored under other sources" in section
    empty = build_report(_inputs(), tmp_path / "empty", "t").markdown.read_text("utf-8")
    assert f"holds no {FAMILY} winner" in empty
    # two problems that differ in their last field only: cut at 90 characters, their rows read the same
    wide = {"dst": [16384, 16384], "dtype": "float32", "origin": [0, 0], "padding": "zero", "src": [16384, 16384]}
    pair = [
        Covered(FAMILY, "NVIDIA H200", {**wide, "transpose": t}, 0.5, None, None, False, False, True) for t in (0, 1)
    ]
    rows = _md_rows(
        _md_section(
            build_report(_inputs(coverage=tuple(pair)), tmp_path / "w", "t").markdown.read_text("utf-8"), COVERAGE
        )
    )
    assert [r["Problem"].endswith(f"transpose={t}") for r, t in zip(rows, (0, 1), strict=True)] == [True, True]


def test_a_sweeps_report_shows_the_coverage_of_the_database_it_stored_into(
    sweep_file: Path, recording: Path, tmp_path: Path
) -> None:
    results = tmp_path / "r"
    tunebox.tune(sweep_file, backend="replay", recording=recording, results=results, trials=3)
    files = tunebox.report(sweep_file, results=results, out=tmp_path / "out", replay=True)
    section = _md_section(
        files.markdown.read_text("utf-8"), "Coverage: the problems the winners database answers exactly"
    )
    rows = _md_rows(section)
    assert len(rows) == 2 and all(r["Current"] == "yes" and r["Tuned by"] == "sweep" for r in rows)


def test_tunebox_report_stays_the_function_whatever_imports_its_subpackage() -> None:
    """Importing a submodule sets it as an attribute of its package: ``tunebox.report`` the function
    must not become ``tunebox.report`` the package after a first report or an import of it."""
    code = "import tunebox.report.render, tunebox.report.tables, tunebox; assert callable(tunebox.report)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unfinished_sweep_is_reported_as_such_naming_the_problems_not_evaluated(tmp_path: Path) -> None:
    """A report of an interrupted sweep showed its winners with no word of the problems it never reached."""
    only_small = tuple(r for r in _records() if r.problem != LARGE)
    markdown = build_report(_inputs(only_small), tmp_path / "out", "copy").markdown.read_text(encoding="utf-8")
    assert "1 of the sweep's 2 problems have no evaluation yet (" in markdown
    assert "the sweep is unfinished, and running `tunebox tune` on its file again resumes it." in markdown
    complete = build_report(_inputs(), tmp_path / "all", "copy").markdown.read_text(encoding="utf-8")
    assert "no evaluation yet" not in complete
    # stopped inside a problem: its winner was listed as final (the small copy has no finalist re-timing)
    assert "1 problem(s) searched in part, their finalists not yet re-timed (copy 1K): their winners are" in complete
    retimed = (*_records(), _rec(SMALL, {"tile": 128, "vec": 4}, samples=(0.5,), phase="final"))
    done = build_report(_inputs(retimed), tmp_path / "done", "copy").markdown.read_text(encoding="utf-8")
    assert "searched in part" not in done


def test_two_sweeps_of_one_family_write_two_reports(tmp_path: Path) -> None:
    """Reports were named after the family: gemm_grid.toml's overwrote gemm.toml's."""
    first = build_report(_inputs(), tmp_path, "first", stem="copy_small")
    second = build_report(_inputs(), tmp_path, "second", stem="copy_large")
    assert (first.html.name, second.html.name) == ("copy_small.html", "copy_large.html")
    assert first.html.exists() and "first" in first.html.read_text(encoding="utf-8")
    assert {p.name for p in second.images} == {
        "copy_large_history.png",
        "copy_large_bandwidth.png",
        "copy_large_speedup.png",
    }
    with pytest.raises(ValueError, match="report name '../x' is not usable as a file name"):
        build_report(_inputs(), tmp_path, "x", stem="../x")


def test_paths_given_as_text_and_the_database_a_sweep_was_given(
    sweep_file: Path, recording: Path, tmp_path: Path
) -> None:
    """tune and report refused text paths (TypeError: unsupported operand type(s) for /: 'str' and 'str'), and
    a report showed the default database's coverage where the sweep had stored into another."""
    db = str(tmp_path / "mine.sqlite")
    tunebox.tune(
        str(sweep_file), backend="replay", recording=str(recording), results=str(tmp_path / "r"), db=db, trials=3
    )
    files = tunebox.report(str(sweep_file), results=str(tmp_path / "r"), out=str(tmp_path / "out"), replay=True, db=db)
    section = _md_section(
        files.markdown.read_text("utf-8"), "Coverage: the problems the winners database answers exactly"
    )
    assert len(_md_rows(section)) == 2
    default = tunebox.report(str(sweep_file), results=str(tmp_path / "r"), out=str(tmp_path / "d"), replay=True)
    assert "holds no tile_copy winner" in default.markdown.read_text("utf-8")
    with pytest.raises(DatabaseError, match="no winners database at .*nosuch.sqlite"):  # was an empty coverage
        tunebox.report(
            sweep_file, results=tmp_path / "r", out=tmp_path / "n", replay=True, db=tmp_path / "nosuch.sqlite"
        )


def test_a_log_of_another_family_is_refused_by_tune_report_and_results(
    sweep_file: Path, recording: Path, tmp_path: Path
) -> None:
    """A results directory whose sweep log holds gather's records: report raised a bare ValueError, tune
    appended tile_copy's records to it, results returned gather's frame."""
    spec = load_sweep(sweep_file)
    log = tmp_path / "r" / "sweeps" / f"{spec.name}-replay" / "evals.jsonl"
    log.parent.mkdir(parents=True)
    EvalLog(log).append(_rec({"n": 1}, {"x": 1}, samples=(0.1,), family="gather"))
    before = log.read_bytes()
    with pytest.raises(DatabaseError, match=r"holds records of gather, not of tile_copy only.*Move it aside"):
        tunebox.tune(sweep_file, backend="replay", recording=recording, results=tmp_path / "r", trials=3)
    with pytest.raises(DatabaseError, match="holds records of gather"):
        tunebox.report(sweep_file, results=tmp_path / "r", out=tmp_path / "out", replay=True)
    with pytest.raises(DatabaseError, match="holds records of gather"):
        tunebox.results(sweep_file, results=tmp_path / "r", replay=True)
    assert log.read_bytes() == before


def test_results_of_a_file_it_cannot_read_says_what_it_reads(tmp_path: Path) -> None:
    """A winners database given to results() was read as a sweep file: 'not valid TOML (utf-8 codec ...)'."""
    db = tmp_path / "winners.sqlite"
    db.write_bytes(b"SQLite format 3\x00")
    with pytest.raises(SpaceError, match=r"results\(\) reads a sweep file \(.toml\), an evaluation log"):
        tunebox.results(db)
