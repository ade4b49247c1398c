"""compute-sanitizer checks (issue 19 item 10) without a GPU: the report parser on captured outputs,
and the runner's plumbing with a stand-in compute-sanitizer script."""

from __future__ import annotations

import pickle
import stat
from pathlib import Path

from tunebox.build.nvrtc import BuildResult
from tunebox.families import get
from tunebox.records import Status
from tunebox.runner import sanitizer
from tunebox.runner.sanitizer import ERROR_EXIT, TOOLS, ComputeSanitizer
from tunebox.runner.sanitizer_report import OUTCOME_MARK, Verdict, parse

OK_LINE = OUTCOME_MARK + '{"status": "ok", "message": ""}'

MEMCHECK = f"""========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at void faulty_copy<Cfg>(Cfg::Args)+0x1f0
=========     by thread (59,0,0) in block (3906,0,0)
=========     Address 0x7f2a5c000000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2a5bc2d200 of size 4000036 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========
{OK_LINE}
========= ERROR SUMMARY: 1 error
"""

RACECHECK = f"""========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at void faulty_copy<Cfg>(Cfg::Args)+0x90
=========     and Read access at void faulty_copy<Cfg>(Cfg::Args)+0xb0 [3906 hazards]
=========
{OK_LINE}
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 1 error
"""

CLEAN = f"""========= COMPUTE-SANITIZER
{OK_LINE}
========= ERROR SUMMARY: 0 errors
"""

WARNED = f"""========= COMPUTE-SANITIZER
========= Warning: Race reported between Read access at void reduce<Cfg>(Cfg::Args)+0x40
=========     and Write access at void reduce<Cfg>(Cfg::Args)+0x60 [31 hazards]
{OK_LINE}
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
========= ERROR SUMMARY: 0 errors
"""


def test_a_memcheck_report_is_parsed_with_its_first_lines():
    run = parse("memcheck", MEMCHECK, True, 2.5)
    assert (run.tool, run.verdict, run.errors, run.seconds) == ("memcheck", Verdict.REPORTED, 1, 2.5)
    assert run.lines[0] == "Invalid __global__ read of size 4 bytes"
    assert "Address 0x7f2a5c000000 is out of bounds" in run.lines and "COMPUTE-SANITIZER" not in run.lines


def test_a_racecheck_report_is_parsed():
    run = parse("racecheck", RACECHECK, True, 1.0)
    assert run.verdict is Verdict.REPORTED and run.errors == 1
    assert run.lines[0].startswith("Error: Race reported between Write access at")
    assert "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)" in run.lines


def test_a_clean_run_passes():
    assert parse("synccheck", CLEAN, False, 1.0) == sanitizer.ToolRun("synccheck", Verdict.PASSED, 0, (), 1.0)


def test_racecheck_warnings_pass_but_are_kept():
    run = parse("racecheck", WARNED, False, 1.0)
    assert run.verdict is Verdict.PASSED and run.lines[0].startswith("Warning: Race reported")


def test_the_error_exit_status_reports_even_without_a_count():
    run = parse("memcheck", "========= COMPUTE-SANITIZER\n========= Program hit an error\n", True, 1.0)
    assert run.verdict is Verdict.REPORTED and run.errors == 1 and run.lines == ("Program hit an error",)


def test_a_run_without_a_summary_is_skipped_not_passed():
    run = parse("memcheck", "========= COMPUTE-SANITIZER\nSegmentation fault\n", False, 1.0)
    assert run.verdict is Verdict.SKIPPED and "no summary from compute-sanitizer" in run.lines[0]
    assert "Segmentation fault" in run.lines[0]


def test_a_child_that_failed_outside_any_report_is_skipped():
    failed = CLEAN.replace(OK_LINE, OUTCOME_MARK + '{"status": "resource_error", "message": "OUT_OF_MEMORY"}')
    run = parse("memcheck", failed, False, 1.0)
    assert run.verdict is Verdict.SKIPPED and "resource_error: OUT_OF_MEMORY" in run.lines[0]
    assert parse("memcheck", CLEAN.replace(OK_LINE, ""), False, 1.0).verdict is Verdict.SKIPPED


# -- the runner, with a stand-in compute-sanitizer ----------------------------------------------------


def faults_variant(fault: str = "none"):
    family = get("faults")
    problem = family.parse_problem({"n": 1000})
    config = family.space.validate({"template": "planted", "block": 256, "passes": 1, "fault": fault})
    build = BuildResult(family.render(problem, config), "sm_90", Status.OK, cubin=b"cubin", lowered_name="k")
    return family, problem, config, build


def stand_in(tmp_path: Path, outputs: dict[str, str], exit_status: dict[str, int] | None = None, sleep: int = 0):
    """A compute-sanitizer that saves its arguments and its input, sleeps, and prints the canned output of its tool."""
    script = tmp_path / "compute-sanitizer"
    status = exit_status or {}
    cases = "\n".join(f"  {t}) cat <<'EOF'\n{text}EOF\n  exit {status.get(t, 0)};;" for t, text in outputs.items())
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path}/args\ncat > {tmp_path}/stdin\nsleep {sleep}\ncase "$2" in\n{cases}\nesac\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_each_tool_runs_the_variant_in_a_sanitized_child(tmp_path):
    checker = ComputeSanitizer(executable=stand_in(tmp_path, dict.fromkeys(TOOLS, CLEAN)))
    check = checker.check(*faults_variant(), seed=5)
    assert [(r.tool, r.verdict) for r in check.runs] == [(t, Verdict.PASSED) for t in TOOLS]
    assert check.reported is None and not check.skipped and check.describe() == "memcheck, racecheck, synccheck passed"
    args = (tmp_path / "args").read_text().splitlines()
    assert args[0].startswith(f"--tool memcheck --report-api-errors no --error-exitcode {ERROR_EXIT} ")
    assert args[0].endswith("-m tunebox.runner.sanitizer")
    job = pickle.loads((tmp_path / "stdin").read_bytes())  # the untimed job of the variant, its seed
    assert (job.family, job.problem, job.input_seed, job.time) == ("faults", {"n": 1000}, 5, False)
    assert job.variant.cubin == b"cubin"


def test_the_first_report_stops_the_check_and_says_why(tmp_path):
    outputs = {"memcheck": CLEAN, "racecheck": RACECHECK, "synccheck": CLEAN}
    checker = ComputeSanitizer(executable=stand_in(tmp_path, outputs, {"racecheck": ERROR_EXIT}))
    check = checker.check(*faults_variant("smem_race"), seed=5)
    assert [r.tool for r in check.runs] == ["memcheck", "racecheck"] and check.reported.tool == "racecheck"
    assert check.describe().startswith("racecheck: 1 error(s): Error: Race reported between Write access at")


def test_without_compute_sanitizer_every_tool_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setattr(sanitizer.shutil, "which", lambda name: None)
    check = ComputeSanitizer().check(*faults_variant(), seed=5)
    assert check.reported is None and len(check.skipped) == 3
    assert "compute-sanitizer: not on PATH" in check.describe() and "passed" not in check.describe()


def test_a_tool_past_its_timeout_is_killed_and_skipped(tmp_path):
    checker = ComputeSanitizer(tools=("racecheck",), timeout_s=1, executable=stand_in(tmp_path, {}, sleep=30))
    (run,) = checker.check(*faults_variant(), seed=5).runs
    assert run.verdict is Verdict.SKIPPED and run.lines == ("timed out after 1 s",) and run.seconds < 10
