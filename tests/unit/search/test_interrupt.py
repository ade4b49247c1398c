"""Ctrl-C during a sweep that compiles (helper processes of the compile pool running): the sweep ends
with the resume hint alone, no helper prints a KeyboardInterrupt traceback. Runs on the CPU (NVRTC
compiles; an in-process stand-in answers for the device)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parents[1]

SCRIPT = """
import os, signal, sys, time
sys.path[:0] = [{unit!r}, {search!r}]
import tunebox.api as api
from test_sweep_pipeline import QueueBackend
from tunebox.cli import main

# as in a terminal: a shell's background job (CI's runner, say) inherits SIGINT ignored, and Python then
# keeps it ignored instead of raising KeyboardInterrupt
signal.signal(signal.SIGINT, signal.default_int_handler)

class CtrlC(QueueBackend):
    def next_outcome(self):
        os.killpg(os.getpgrp(), signal.SIGINT)  # a terminal's Ctrl-C signals the whole process group
        # Short sleeps: the kernel may deliver the signal to any thread that does not block it, and
        # then only the main thread's next check between bytecodes raises KeyboardInterrupt, which
        # one long sleep would postpone past its end.
        for _ in range(3000):
            time.sleep(0.01)
        raise AssertionError("no KeyboardInterrupt")


api.make_backend = lambda spec, backend, recording: CtrlC()
sys.exit(main(["tune", {sweep!r}, "--backend", "gpu", "--results", {results!r}, "--quiet"]))
"""


def test_ctrl_c_ends_a_compiling_sweep_with_the_resume_hint_only(tmp_path):
    from test_sweep_pipeline import SWEEP

    sweep = tmp_path / "queue.toml"
    sweep.write_text(SWEEP)
    script = SCRIPT.format(unit=str(UNIT), search=str(UNIT / "search"), sweep=str(sweep), results=str(tmp_path / "r"))
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,
        cwd=UNIT.parents[1],
    )  # its own process group
    assert done.returncode == 130, done.stderr
    assert done.stderr == "tunebox: interrupted; run the same command again to resume\n"
    assert list((tmp_path / "r" / "cache" / "cubin").rglob("*.cubin"))  # compile helpers had run
