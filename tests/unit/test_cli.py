"""The ``tunebox`` command end to end on the replay backend: tune, query, report, bad input."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_clock import Clock
from sweep_fixtures import replay_argv

from tunebox.cli import main, parser
from tunebox.records import EvalRecord, Status, Timing
from tunebox.search.runs import ProblemOutcome, SweepProgress, SweepResult

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def tuned(sweep_file, recording, tmp_path, capsys):
    results = tmp_path / "r"
    code, out, _ = run(capsys, *replay_argv(sweep_file, recording, results, "--trials", "8", "--quiet"))
    assert code == 0
    assert "REPLAYED" in out and "copy:" in out and "transpose:" in out
    return results


def test_query_answers_exact_nearest_and_default(tuned, capsys):
    db = str(tuned / "winners-replay.sqlite")
    exact = {"dtype": "float32", "src": [1000, 1000], "dst": [1000, 1000]}
    code, out, _ = run(capsys, "query", "tile_copy", json.dumps(exact), "--db", db)
    assert code == 0 and json.loads(out)["source"] == "exact"
    near = {"dtype": "float32", "src": [1200, 1000], "dst": [1200, 1000]}
    answer = json.loads(run(capsys, "query", "tile_copy", json.dumps(near), "--db", db)[1])
    assert answer["source"] == "nearest" and answer["replayed"] is True
    other = {"dtype": "float16", "src": [64, 64], "dst": [64, 64]}
    assert json.loads(run(capsys, "query", "tile_copy", json.dumps(other), "--db", db)[1])["source"] == "default"


def test_report_writes_html_with_plots(tuned, sweep_file, tmp_path, capsys):
    code, out, _ = run(capsys, "report", str(sweep_file), "--results", str(tuned), "--out", str(tmp_path / "rep"))
    assert code == 0
    html = (tmp_path / "rep" / "small.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html and "replayed" in html
    assert (tmp_path / "rep" / "small.md").exists()


def test_shipped_winners_answer_the_benchmark_problem(capsys):
    problem = {"dtype": "float32", "src": [16384, 16384], "dst": [16384, 16384]}
    code, out, _ = run(capsys, "query", "tile_copy", json.dumps(problem), "--db", str(REPO / "results/winners.sqlite"))
    answer = json.loads(out)
    assert code == 0 and answer["source"] == "exact" and answer["replayed"] is False
    assert "H200" in answer["explanation"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["query", "no_such_family", "{}"], "unknown family"),
        (["query", "tile_copy", "{not json"], "not valid JSON"),
        (["query", "tile_copy", '{"dtype": "float32", "dtype": "float16"}'], "gives 'dtype' more than once"),
        (["query", "tile_copy", '{"src": [1' + "0" * 5000 + "]}"], "a number too long to read"),
        (["query", "tile_copy", '{"dtype": "float32", "src": [-4, 4], "dst": [4, 4]}'], "src"),
        (["query", "tile_copy", '{"dtype": "float64", "src": [4, 4], "dst": [4, 4]}'], "unknown dtype"),
        (["tune", "no/such/file.toml", "--backend", "replay"], "no such sweep file"),
    ],
)
def test_bad_input_is_one_clear_line(capsys, tmp_path, argv, fragment):
    argv = [*argv, "--db", str(tmp_path / "w.sqlite")] if argv[0] == "query" else argv
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("tunebox: error:") and fragment in err and err.count("\n") == 1


def test_malformed_sweep_is_rejected_and_nothing_is_stored(tuned, tmp_path, capsys):
    db = tuned / "winners-replay.sqlite"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    bad = tmp_path / "bad.toml"
    bad.write_text('family = "tile_copy"\n[[problems]]\ndtype = "float32"\nsrc = [1, 1]\ndst = [1, 1]\nsrc_typo = 3\n')
    code, _, err = run(capsys, "tune", str(bad), "--backend", "replay", "--results", str(tuned))
    assert code == 2 and "src_typo" in err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_families_lists_tunables(capsys):
    code, out, _ = run(capsys, "families")
    assert code == 0 and "tile_copy" in out and "vec_bytes" in out


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "tunebox", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tune" in done.stdout and "report" in done.stdout


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("tunebox 0.")


def test_every_option_of_every_subcommand_has_help():
    top = parser()
    subcommands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, sub in [("tunebox", top), *subcommands.choices.items()]
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []
    tune_db = next(a for a in subcommands.choices["tune"]._actions if "--db" in a.option_strings)
    assert "winners-replay.sqlite" in tune_db.help  # the replay backend's default


@pytest.mark.parametrize("argv", [["families"], ["--help"], ["families", "--help"]])
def test_a_closed_stdout_ends_quietly(argv):
    """`tunebox families | head -1`: the reader is gone before tunebox writes; no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunebox", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    proc.stdout.close()  # head -1 has read its line and gone
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1) and err == ""  # 1: the write failed (EPIPE), as Python's own


def test_ceilings_never_suggests_an_option_it_lacks(capsys, monkeypatch):
    """The GPU worker's start-up error suggested `--backend replay`, which ceilings does not have (a
    regular expression cut it out, leaving a doubled period)."""
    import functools

    from stand_in_workers import failing_canary

    import tunebox.ceilings

    monkeypatch.setattr(tunebox.ceilings, "measure", functools.partial(tunebox.ceilings.measure, target=failing_canary))
    code, out, err = run(capsys, "ceilings", "--out", "c.json", "--command", "x")
    assert code == 2 and out == ""
    assert err == (
        "tunebox: error: tunebox ceilings measures the GPU of the host it runs on (no usable GPU: canary: the "
        "compare kernel found differences in equal buffers); run it on a GPU host\n"
    )
    top = parser()
    subcommands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    ceilings_options = {o for a in subcommands.choices["ceilings"]._actions for o in a.option_strings}
    assert not {"--backend", "--recording"} & ceilings_options


def test_ceilings_without_a_gpu_says_so_without_other_options(capsys):
    from tunebox.runner.probe import gpu_status

    if gpu_status()[0]:
        pytest.skip("a GPU is here: ceilings would measure it")
    code, out, err = run(capsys, "ceilings", "--out", "c.json", "--command", "x")
    assert code == 2 and err.startswith("tunebox: error:") and "GPU host" in err and "--backend" not in err


def test_query_of_a_database_that_does_not_exist_is_an_error(capsys, tmp_path):
    typo = tmp_path / "winers.sqlite"
    code, out, err = run(
        capsys, "query", "tile_copy", '{"dtype": "float32", "src": [4, 4], "dst": [4, 4]}', "--db", str(typo)
    )
    assert code == 2 and out == "" and f"no winners database at {typo}" in err and "TUNEBOX_DB" in err
    assert not typo.exists()


def test_query_finds_the_default_database_from_any_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TUNEBOX_DB"}
    env["PYTHONPATH"] = str(REPO)
    problem = '{"dtype": "float32", "src": [16384, 16384], "dst": [16384, 16384]}'
    done = subprocess.run(
        [sys.executable, "-m", "tunebox", "query", "tile_copy", problem],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "no winners database" not in done.stdout and json.loads(done.stdout)["source"] in ("exact", "default")
    help_text = subprocess.run(
        [sys.executable, "-m", "tunebox", "query", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "TUNEBOX_DB" in " ".join(help_text.split())


def test_query_reads_the_database_tunebox_db_names(tuned, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TUNEBOX_DB", str(tuned / "winners-replay.sqlite"))
    monkeypatch.chdir(tmp_path)
    exact = {"dtype": "float32", "src": [1000, 1000], "dst": [1000, 1000]}
    code, out, _ = run(capsys, "query", "tile_copy", json.dumps(exact))
    assert code == 0 and json.loads(out)["source"] == "exact"


def test_a_second_sweep_of_the_same_results_is_refused_at_once(sweep_file, recording, tmp_path, capsys):
    """Another process holds the sweep's lock: refused naming the lock and the process; once that
    process is gone (killed: no stale lock), the sweep runs."""
    results = tmp_path / "r"
    lock_dir = results / "sweeps" / "small-replay"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tunebox.store.lock import SweepLock; "
            "SweepLock(sys.argv[1]).acquire(); print('locked', flush=True); time.sleep(120)",
            str(lock_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        argv = replay_argv(sweep_file, recording, results, "--trials", "3", "--quiet")
        start = time.monotonic()
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and time.monotonic() - start < 10
        assert "another sweep is running" in err and str(lock_dir / "sweep.lock") in err
        assert f"pid {holder.pid}" in err and err.count("\n") == 1
        assert not (lock_dir / "evals.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    code, out, err = run(capsys, *argv)
    assert code == 0 and "REPLAYED" in out


def progress_at(done: int, record=None, index: int = 1, budget: int = 12) -> SweepProgress:
    return SweepProgress(
        "copy",
        index,
        2,
        done,
        budget,
        done + (index - 1) * budget,
        2 * budget,
        run_done=done,
        elapsed_s=2.0,
        best_ms=0.4123 if done else None,
        deadline_s=3600.0,
        record=record,
    )


def test_progress_line_has_problem_count_totals_rate_best_and_time_left():
    from tunebox.progress import describe

    assert describe(progress_at(4, record=object())) == (
        "[1/2 copy] 4/12 variants (sweep 4/24), 2.0 variants/s, best 0.4123 ms, ~10 s left"
    )
    assert describe(progress_at(0)) == "[1/2 copy] 0/12 variants (sweep 0/24), - variants/s, best -, ? left"
    estimated = dataclasses.replace(progress_at(0), sweep_estimated=True)
    assert describe(estimated).startswith("[1/2 copy] 0/12 variants (sweep 0/~24), ")


def test_progress_off_a_terminal_is_a_line_every_few_seconds():
    import io

    from tunebox.progress import Progress

    stream, clock = io.StringIO(), Clock()
    progress = Progress(stream=stream, interval=5.0, clock=clock)
    progress(progress_at(0))  # a problem starts: always shown
    for done in range(1, 12):
        clock.now += 1.0
        progress(progress_at(done, record=object()))
    progress(progress_at(12, record=object()))  # the problem ends: shown
    progress.end()
    lines = stream.getvalue().splitlines()
    assert [line.split("]")[1].split(" variants")[0] for line in lines] == [" 0/12", " 5/12", " 10/12", " 12/12"]
    assert "\r" not in stream.getvalue()


def test_progress_on_a_terminal_is_one_line_rewritten():
    import io

    from tunebox.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream, clock = Terminal(), Clock()
    progress = Progress(stream=stream, clock=clock)
    for done in range(0, 13):
        clock.now += 1.0
        progress(progress_at(done, record=object() if done else None))
    assert stream.getvalue().count("\r") == 13 and "\n" not in stream.getvalue()
    progress.end()
    assert stream.getvalue().endswith("12/12 variants (sweep 12/24), 6.0 variants/s, best 0.4123 ms, ~2 s left\n")


def test_tune_shows_progress_unless_quiet(sweep_file, recording, tmp_path, capsys):
    argv = replay_argv(sweep_file, recording, tmp_path / "r", "--trials", "3")
    code, _, err = run(capsys, *argv)
    assert code == 0 and "[1/2 copy] 0/3 variants (sweep 0/~6)" in err  # the problem to come: estimated
    assert "[2/2 transpose] 3/3 variants (sweep 6/6)" in err
    code, _, err = run(capsys, *argv, "--quiet")
    assert code == 0 and err == ""


def test_sigusr1_prints_every_threads_stack_and_the_command_goes_on():
    """What ``kill -USR1 <pid>`` does to a tunebox command (a sweep that seems stuck)."""
    code = (
        "import os, signal, threading, time\n"
        "from tunebox.cli import dump_stacks_on_sigusr1\n"
        "dump_stacks_on_sigusr1()\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True, name='helper').start()\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "time.sleep(0.2)\n"
        "print('still running')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "still running"
    assert done.stderr.lower().count("thread 0x") >= 2 and "Current thread" in done.stderr  # both threads


def test_help_describes_tunebox_for_its_users():
    description = parser().description
    assert "commands.py" not in description and "print" not in description
    assert all(f"tunebox {command}" in description for command in ("tune", "query", "report", "families"))


@pytest.mark.parametrize("argv", [["-v", "coverage"], ["coverage", "-v"], ["tune", "x.toml", "--verbose"]])
def test_verbose_is_taken_before_or_after_the_subcommand(argv):
    assert parser().parse_args(argv).verbose is True


@pytest.mark.parametrize(
    "option, value, fragment",
    [
        ("--replay-pace", "-1", "argument --replay-pace: must be a finite number of 0 or more, got -1"),
        ("--heartbeat", "-1", "argument --heartbeat: must be a finite number of 1 or more, got -1"),
        ("--heartbeat", "0", "argument --heartbeat: must be a finite number of 1 or more, got 0"),
        ("--heartbeat", "ten", "argument --heartbeat: invalid int value: 'ten'"),
        (
            "--trials",
            "0",
            "argument --trials: must be a finite number of 1 or more, got 0",
        ),  # was worded as the sweep file's key
        ("--seconds", "nan", "argument --seconds: must be a finite number of 1 or more, got nan"),
    ],
)
def test_tune_refuses_negative_pace_and_heartbeat(capsys, option, value, fragment):
    with pytest.raises(SystemExit) as refused:
        parser().parse_args(["tune", "x.toml", option, value])
    assert refused.value.code == 2 and fragment in capsys.readouterr().err
    assert parser().parse_args(["tune", "x.toml", "--replay-pace", "0"]).replay_pace == 0.0


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--seeds", "1"], "argument --seeds: must be a finite number of 2 or more, got 1"),
        (["--jobs", "0"], "argument --jobs: must be a finite number of 1 or more, got 0"),
        (["--budget-factor", "0"], "argument --budget-factor: must be a finite number of 1 or more, got 0"),
        ([], "the following arguments are required: --out"),
    ],
)
def test_strategies_refuses_what_it_cannot_run(capsys, argv, fragment):
    """--out is required: its old default overwrote the committed results/benchmarks/search.json."""
    out = [] if not argv else ["--out", "s.json"]
    with pytest.raises(SystemExit) as refused:
        parser().parse_args(["strategies", *out, *argv])
    assert refused.value.code == 2 and fragment in capsys.readouterr().err


def one_error_line(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "" and err.startswith("tunebox: error: ") and err.count("\n") == 1, err
    return err


def test_results_under_a_file_is_one_line_naming_the_file(sweep_file, recording, tmp_path, capsys):
    a_file = tmp_path / "passwd"
    a_file.write_text("not a directory\n")
    err = one_error_line(*run(capsys, *replay_argv(sweep_file, recording, a_file, "--quiet")))
    assert f"{a_file}: a file where a directory is needed; give a directory's path" in err


def test_read_only_results_is_one_line_naming_the_lock(sweep_file, recording, tmp_path, capsys, monkeypatch):
    import errno

    import tunebox.store.lock

    real_open = os.open

    def read_only(path, *args, **kwargs):
        if str(path).endswith("sweep.lock"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(tunebox.store.lock.os, "open", read_only)
    err = one_error_line(*run(capsys, *replay_argv(sweep_file, recording, tmp_path / "r", "--quiet")))
    lock = tmp_path / "r" / "sweeps" / "small-replay" / "sweep.lock"
    assert f"{lock}: read-only file system; give a path on a writable file system" in err


@pytest.mark.parametrize("out_is", ["a file", "under a file"])
def test_report_out_on_a_file_is_one_line_naming_the_file(tuned, sweep_file, tmp_path, capsys, out_is):
    a_file = tmp_path / "passwd"
    a_file.write_text("not a directory\n")
    out = a_file if out_is == "a file" else a_file / "reports"
    code, stdout, err = run(capsys, "report", str(sweep_file), "--results", str(tuned), "--out", str(out))
    assert f"{a_file}: a file where a directory is needed" in one_error_line(code, stdout, err)


def test_report_into_a_read_only_folder_is_one_line_naming_the_file(tuned, sweep_file, tmp_path, capsys, monkeypatch):
    import errno

    import matplotlib.figure

    def read_only(figure, path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", read_only)
    out = tmp_path / "rep"
    code, stdout, err = run(capsys, "report", str(sweep_file), "--results", str(tuned), "--out", str(out))
    err = one_error_line(code, stdout, err)
    assert f"{out / 'small_history.png'}: permission denied; give a path this user may read or write" in err


def test_an_os_error_of_no_file_keeps_its_traceback(monkeypatch):
    import tunebox.commands

    def reset(args):
        raise ConnectionResetError("not a file operation")

    monkeypatch.setattr(tunebox.commands, "families", reset)
    with pytest.raises(ConnectionResetError):
        main(["families"])


def test_input_nested_too_deeply_is_one_line(tmp_path, capsys):
    deep = "[" * 3000 + "]" * 3000
    err = one_error_line(*run(capsys, "query", "tile_copy", f'{{"x": {deep}}}', "--db", str(tmp_path / "w.sqlite")))
    assert "the problem: nested too deeply to read (JSON" in err and "give it with fewer levels" in err
    sweep = tmp_path / "deep.toml"
    sweep.write_text(f'family = "tile_copy"\nx = {deep}\n')
    err = one_error_line(*run(capsys, "space", str(sweep)))
    assert f"{sweep}: nested too deeply to read; a sweep file's values are one or two levels deep" in err


def test_a_recursion_error_outside_a_parser_keeps_its_traceback(monkeypatch):
    import tunebox.commands

    def recurse(args):
        return recurse(args)

    monkeypatch.setattr(tunebox.commands, "families", recurse)
    with pytest.raises(RecursionError):
        main(["families"])


def outcome(name: str, counts: dict[str, int], ms: float | None = None, flops: int = 0) -> ProblemOutcome:
    winner = None
    if ms is not None:
        timing = Timing((ms,) * 5)
        winner = EvalRecord("gemm", {}, {"BM": 64}, Status.OK, timing=timing, bytes_moved=10**6, flops=flops)
    return ProblemOutcome(name, None, winner, None, None, True, counts)  # type: ignore[arg-type]


def fake_tune(monkeypatch, outcomes: list[ProblemOutcome], budgets: dict[str, int]) -> None:
    """``api.tune`` announcing each problem with its budget, then returning ``outcomes``."""
    import tunebox.api

    def tune(spec, progress, **_):
        for index, named in enumerate(spec.problems, start=1):
            budget = budgets[named.name]
            progress(SweepProgress(named.name, index, 2, 0, budget, 0, 24, 0, 1.0, None, 0.0))
        return SweepResult("small", True, tuple(outcomes), 5, 7.0)

    monkeypatch.setattr(tunebox.api, "tune", tune)


def test_problems_the_time_budget_cut_short_are_reported_so(sweep_file, monkeypatch, capsys):
    outcomes = [outcome("copy", {"ok": 4, "wrong_result": 1}, ms=0.5), outcome("transpose", {})]
    fake_tune(monkeypatch, outcomes, {"copy": 12, "transpose": 12})
    code, out, _ = run(capsys, "tune", str(sweep_file), "--seconds", "7", "--quiet")
    ran_out = "the sweep's time budget (7 s) ran out; run the same command again to resume"
    assert code == 0 and f"    picked from the 5 variants evaluated of its 12: {ran_out}" in out
    assert f"  transpose: not searched: {ran_out}" in out and "no valid variant" not in out


def test_problems_searched_in_full_are_not_marked(sweep_file, monkeypatch, capsys):
    outcomes = [outcome("copy", {"ok": 12}, ms=0.5), outcome("transpose", {"compile_error": 3})]
    fake_tune(monkeypatch, outcomes, {"copy": 12, "transpose": 3})
    code, out, _ = run(capsys, "tune", str(sweep_file), "--quiet")
    assert code == 0 and "time budget" not in out and "picked from" not in out
    assert "  transpose: no valid variant (compile_error 3)\n" in out


def test_a_small_problems_rate_never_reads_as_zero(sweep_file, monkeypatch, capsys):
    flops = 2 * 65 * 97 * 73  # 0.92 MFLOP in 9 us: 0.1 TFLOP/s, 0.010% of the peak
    outcomes = [outcome("copy", {"ok": 12}, ms=0.009, flops=flops), outcome("transpose", {"ok": 12}, ms=1.0)]
    fake_tune(monkeypatch, outcomes, {"copy": 12, "transpose": 12})
    out = run(capsys, "tune", str(sweep_file), "--quiet")[1]
    assert "copy: 0.0090 ms, 102 GFLOP/s (0.010% of the bf16 peak)" in out
    assert "transpose: 1.0000 ms, 1.0 GB/s (0.024% of copy limit)" in out


def test_a_shared_sweep_without_psycopg_says_what_to_install(capsys, monkeypatch):
    """The install hint was raised, then storage_error's own import of psycopg ended in a traceback."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    code, out, err = run(
        capsys, "tune", str(REPO / "spaces/tile_copy.toml"), "--storage", "postgresql://u@localhost:1/db"
    )
    assert one_error_line(code, out, err) and "needs psycopg: pip install 'tunebox[distributed]'" in err


def test_a_mistyped_option_gets_the_subcommand_usage_and_the_closest_option(capsys):
    """argparse answered with the top-level usage, which lists no option of tune."""
    with pytest.raises(SystemExit) as refused:
        main(["tune", "x.toml", "--trails", "10"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err.startswith("usage: tunebox tune ")
    assert err.endswith("tunebox tune: error: unrecognized arguments: --trails 10 (did you mean --trials?)\n")


def test_a_resume_asking_fewer_trials_says_what_the_winner_was_picked_from(sweep_file, recording, tmp_path, capsys):
    """It showed '3/3 variants' beside 'statuses: ok 8' and nothing else (an audit)."""
    argv = replay_argv(sweep_file, recording, tmp_path / "r", "--quiet")
    assert run(capsys, *argv, "--trials", "8")[0] == 0
    code, out, _ = run(capsys, *argv, "--trials", "3")
    assert code == 0 and "picked from the 8 variants its log holds (3 asked this run)" in out
