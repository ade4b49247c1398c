"""What tunebox.launch serves (serving.decide): the kernel only where it is known to beat the library
call at that very problem, the library call elsewhere when it can run in place on torch tensors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tunebox.errors import DeviceUnavailable, InvalidProblem
from tunebox.families.base import Baseline
from tunebox.runtime.launch import Launcher
from tunebox.runtime.lookup import LookupResult
from tunebox.runtime.serving import decide

EXACT = LookupResult("gemm", "{}", {"template": "mma"}, "exact", "{}", 1.0, False, "exact match", "torch: mm", 2.0)
IN_PLACE = Baseline("torch: mm", lambda t: t, lambda t, out: None)


def test_the_kernel_runs_only_where_it_is_known_to_beat_the_library() -> None:
    assert decide(EXACT, IN_PLACE, True, "auto").ran == "kernel"
    slower = dataclasses.replace(EXACT, median_ms=3.0)
    assert decide(slower, IN_PLACE, True, "auto").ran == "library"
    untimed = dataclasses.replace(EXACT, library=None, library_ms=None)
    assert decide(untimed, IN_PLACE, True, "auto").ran == "library"
    for source in ("nearest", "default"):  # a winner of another problem proves nothing here
        served = decide(dataclasses.replace(EXACT, source=source), IN_PLACE, True, "auto")
        assert (served.ran, served.source, served.library) == ("library", "library", "torch: mm")
        assert "no tunebox variant is known to beat it" in served.explanation


def test_without_an_in_place_library_call_the_kernel_runs_and_says_why() -> None:
    nearest = dataclasses.replace(EXACT, source="nearest")
    served = decide(nearest, None, True, "auto")
    assert (served.ran, served.source) == ("kernel", "nearest") and "no in-place library form" in served.explanation
    served = decide(nearest, IN_PLACE, False, "auto")
    assert served.ran == "kernel" and "not torch tensors" in served.explanation


def test_use_forces_either_side() -> None:
    assert decide(dataclasses.replace(EXACT, source="default"), IN_PLACE, True, "tunebox").ran == "kernel"
    assert decide(EXACT, IN_PLACE, True, "library").ran == "library"
    with pytest.raises(InvalidProblem, match="use='library' cannot serve this problem: the arrays are not torch"):
        decide(EXACT, IN_PLACE, False, "library")


def test_an_unknown_use_is_refused_before_the_arrays_are_looked_at(tmp_path: Path) -> None:
    """``use="gpu"`` on host arrays was answered with a complaint about the arrays."""
    arrays = {"src": np.zeros((4, 4), np.float32), "dst": np.zeros((4, 4), np.float32)}
    with pytest.raises(InvalidProblem, match="use must be one of"):
        Launcher(cache_dir=tmp_path)("tile_copy", arrays, use="gpu")


def test_a_missing_array_is_named() -> None:
    """It was a bare KeyError('src') from the family's operation."""
    with pytest.raises(InvalidProblem, match="tile_copy needs an array named 'src' \\(got none\\)"):
        Launcher()("tile_copy", {})


def test_no_usable_device_is_device_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a driver cuda-pathfinder raised its own error from the first ``launch`` or ``device_info``."""
    import cuda.core

    class NoDriver(RuntimeError):
        pass

    def no_device() -> None:
        raise NoDriver('"cuda" is an NVIDIA driver library and can only be found via system search.')

    monkeypatch.setattr(cuda.core, "Device", no_device)
    with pytest.raises(DeviceUnavailable, match="needs a CUDA GPU: no NVIDIA driver on this machine"):
        Launcher().device_info()


def test_misaligned_arrays_get_the_library_call_or_a_refusal_that_says_what_to_pass() -> None:
    served = decide(EXACT, IN_PLACE, True, "auto", ("src",))  # even where the kernel is known to win
    assert (served.ran, served.library) == ("library", "torch: mm")
    assert "src is not 16-byte aligned" in served.explanation
    assert decide(EXACT, IN_PLACE, True, "library", ("src", "dst")).ran == "library"
    with pytest.raises(InvalidProblem, match="src, dst are not 16-byte aligned .* pass arrays at aligned addresses"):
        decide(EXACT, IN_PLACE, True, "tunebox", ("src", "dst"))
    with pytest.raises(InvalidProblem, match="dst is not 16-byte aligned"):
        decide(EXACT, IN_PLACE, False, "auto", ("dst",))  # no torch tensors: no library call either
    with pytest.raises(InvalidProblem, match="dst is not 16-byte aligned"):
        decide(EXACT, None, True, "auto", ("dst",))


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda launch: launch("tile_copy", None), "arrays is a dict of buffer name -> GPU array, not NoneType"),
        (lambda launch: launch("tile_copy", {}, stream="s"), "stream is a CUDA stream handle"),
        (
            lambda launch: launch("faults", {}),
            "faults cannot be launched on caller arrays: it is tuned and tested only",
        ),
    ],
)
def test_a_launch_that_cannot_be_described_is_refused_before_cuda(call, fragment: str) -> None:
    """AttributeError, ValueError and NotImplementedError from inside before."""
    launcher = Launcher()
    with pytest.raises(InvalidProblem, match=fragment):
        call(launcher)
    assert launcher.info is None  # CUDA never started


def test_a_bad_first_use_policy_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunebox.runtime import launch as launch_module

    monkeypatch.setattr(launch_module, "_default", None)
    monkeypatch.setenv("TUNEBOX_TUNE", "first-call")
    with pytest.raises(InvalidProblem, match="environment variable TUNEBOX_TUNE='first-call' is not one of"):
        launch_module.default_launcher()
