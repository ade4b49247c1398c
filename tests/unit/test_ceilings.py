"""``tunebox ceilings`` without a GPU: size checks, the rates it derives from a worker's samples, the
file it writes, and the errors for a failed verification and for a host without a GPU."""

from __future__ import annotations

import functools
import json

import pytest
from stand_in_workers import ceiling_answers, failing_canary

from tunebox.ceilings import measure, write_ceilings
from tunebox.cli import main
from tunebox.errors import DeviceUnavailable, InvalidProblem, MeasurementError
from tunebox.limits import BF16_TENSOR_TFLOPS, COPY_LIMIT_GBPS
from tunebox.records import Status
from tunebox.runner.protocol import CeilingsJob, EvaluateJob, Outcome, RetimeJob, failed_reply
from tunebox.runner.timing import FINAL


@pytest.mark.parametrize(
    "sizes, names",
    [
        ({"copy_bytes": 1 << 20}, "copy size 1048576"),
        ({"copy_bytes": (1 << 30) + 2}, "multiple of 4"),
        ({"copy_bytes": "1G"}, "copy size '1G'"),
        ({"matmul_size": 8200}, "matrix size 8200"),
        ({"matmul_size": 512}, "multiple of 64 from 1024"),
    ],
)
def test_sizes_outside_the_ranges_are_refused_before_any_worker_starts(sizes, names):
    with pytest.raises(InvalidProblem, match=names):
        measure(**sizes, target=failing_canary)  # a started worker would raise DeviceUnavailable instead


def test_rates_count_bytes_read_and_written_and_two_flops_per_multiply_add(tmp_path):
    ceilings = measure(copy_bytes=1 << 30, matmul_size=8192, target=ceiling_answers)
    assert ceilings.copy.rate == pytest.approx(2 * 2**30 / 0.5e-3 / 1e9)  # 4295 GB/s
    assert ceilings.matmul.rate == pytest.approx(2 * 8192**3 / 2.0e-3 / 1e12)  # the median sample: 550 TFLOP/s
    document = write_ceilings(ceilings, tmp_path / "c.json", "tunebox ceilings --out c.json")
    assert json.loads((tmp_path / "c.json").read_text()) == document
    copy, matmul = document["ceilings"]
    assert copy["verified"] == "bit for bit" and copy["samples"] == 20 and copy["noise"] == 0.0
    assert copy["fraction_of_assumed"] == pytest.approx(copy["rate"] / COPY_LIMIT_GBPS)
    assert matmul["fraction_of_assumed"] == pytest.approx(matmul["rate"] / BF16_TENSOR_TFLOPS)
    assert document["device"] == "stand-in" and document["command"] == "tunebox ceilings --out c.json"
    assert set(document["versions"]) >= {"python", "cuda-bindings", "torch"}


def test_a_copy_that_fails_its_verification_is_an_error_not_a_rate():
    with pytest.raises(MeasurementError, match="device-to-device copy.*wrong_result: copy: 3 of 268435456 words"):
        measure(target=functools.partial(ceiling_answers, copy_status=Status.WRONG_RESULT))


def test_a_host_without_a_gpu_is_told_to_run_it_on_one(tmp_path, capsys):
    with pytest.raises(DeviceUnavailable, match="measures the GPU of the host it runs on.*run it on a GPU host"):
        measure(target=failing_canary)
    assert main(["ceilings", "--out", str(tmp_path / "c.json"), "--command", "x", "--matmul-size", "100"]) == 2
    assert "matrix size 100" in capsys.readouterr().err and not (tmp_path / "c.json").exists()


def test_a_job_failed_as_a_whole_answers_once_per_measurement():
    lost = Outcome(Status.TIMEOUT, "killed", fatal=True)
    assert failed_reply(CeilingsJob(1 << 30, 8192, FINAL, 0), lost) == [lost, lost]
    assert failed_reply(RetimeJob("tile_copy", {}, (), FINAL, 0), lost) == [lost]  # the baseline alone
    assert failed_reply(EvaluateJob("tile_copy", {}, None, FINAL, 0), lost) is lost
