"""Jobs the GPU tests send to the worker: verify one variant (bit for bit, untimed), or time variants
with the family's torch baseline interleaved."""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
from pathlib import Path

from tunebox.families.base import KernelSource, Problem
from tunebox.families.contract import Family
from tunebox.kernels_dir import kernels_dir
from tunebox.params import Config
from tunebox.records import Status
from tunebox.runner.protocol import EvaluateJob, Outcome, RetimeJob, Variant, variant_of
from tunebox.runner.timing import SCREEN


def variant(builder, family: Family, problem: Problem, config: Config, source: KernelSource | None = None) -> Variant:
    build = builder.build_one(source or family.render(problem, config))
    assert build.status is Status.OK, build.log
    return variant_of(family, problem, config, build)


def spread_configs(family: Family, problem: Problem, make, tiles, epilogues, spread, depths) -> list[Config]:
    """Each tile shape (BM, BN) of ``tiles`` with each of ``epilogues``, at the next (stages, raster,
    group) of ``spread`` (cycled), built by ``make(**values)`` at the first ring depth of (stages,
    *depths) that ``problem`` admits; left out where none does (shared memory, D's alignment)."""
    configs = []
    cycle = itertools.cycle(spread)
    for (bm, bn), epilogue in itertools.product(tiles, epilogues):
        stages, raster, group = next(cycle)
        values = {"BM": bm, "BN": bn, "raster": raster, "group": group, "epilogue": epilogue}
        built = (make(**values, stages=depth) for depth in (stages, *depths))
        config = next((c for c in built if not family.violations(problem, c)), None)
        if config is not None:
            configs.append(config)
    return configs


def evaluate(
    runner,
    builder,
    family: Family,
    problem: Problem,
    config: Config,
    source: KernelSource | None = None,
    timeout_s: float | None = None,
) -> Outcome:
    """Verify ``config`` (or ``source``, a sabotaged rendering of it) on ``problem``, untimed."""
    job = EvaluateJob(
        family.name, problem.to_dict(), variant(builder, family, problem, config, source), SCREEN, 1234, time=False
    )
    return runner.run(job, timeout_s=timeout_s)


def retime_with_baseline(runner, builder, family: Family, problem: Problem, config: Config) -> list[Outcome]:
    """The variant's timing, then the torch baseline's (verified against the reference first)."""
    job = RetimeJob(family.name, problem.to_dict(), (variant(builder, family, problem, config),), SCREEN, 7)
    return runner.run(job)


def sabotaged(good: KernelSource, find: str, replace_with: str, header: str | None, folder: str) -> KernelSource:
    """``good`` with ``find`` replaced by ``replace_with`` in its source, or in the device-library ``header``
    (a patched copy written under ``folder``, an include folder searched first)."""
    if header is None:
        bad = dataclasses.replace(good, code=good.code.replace(find, replace_with))
        assert bad.code != good.code, f"{find!r} is not in the source"
        return bad
    text = (kernels_dir() / "include" / header).read_text()
    assert find in text, f"{find!r} is not in {header}"
    patched = Path(folder) / header
    patched.parent.mkdir(parents=True)
    patched.write_text(text.replace(find, replace_with))
    return dataclasses.replace(good, include_dirs=(folder, *good.include_dirs))


def assert_sabotage_caught(
    runner,
    builder,
    family: Family,
    problem: Problem,
    config: Config,
    find: str,
    replace_with: str,
    expect: str = "never written",
    header: str | None = None,
) -> None:
    """A rendering of ``config`` with ``find`` replaced by ``replace_with`` in its source (or in the
    device-library ``header``, e.g. "tunebox/gemm_tiles.cuh": a patched copy in an include folder
    searched first) must fail verification with ``expect`` in the message, and the untouched
    rendering must pass."""
    with tempfile.TemporaryDirectory() as folder:
        bad = sabotaged(family.render(problem, config), find, replace_with, header, folder)
        outcome = evaluate(runner, builder, family, problem, config, bad)
    assert outcome.status is Status.WRONG_RESULT and expect in outcome.message, outcome.message
    assert evaluate(runner, builder, family, problem, config).status is Status.OK


def assert_gemm_launches_agree(tmp_path, config: Config, launches: int = 5) -> None:
    """``config`` stored as the winner of a 16 x 4096 x 4096 gemm, then served by ``tunebox.launch``
    ``launches`` times on the same inputs (D poisoned with NaN before each): within the family's
    tolerance of the float64 product, and D bit for bit the same at every launch."""
    import torch

    from tunebox.families import get
    from tunebox.records import EvalRecord, Timing, WinnerKey
    from tunebox.runtime.arrays import device_array
    from tunebox.runtime.launch import Launcher
    from tunebox.store.winners import WinnersDB

    gemm = get("gemm")
    m, n, k = 16, 4096, 4096
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    launcher = Launcher(tmp_path / "winners.sqlite", cache_dir=tmp_path / "cubins")
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    problem = gemm.problem_from_arrays({"A": device_array(a), "B": device_array(b), "D": device_array(d)})
    gemm.check(problem, config)
    record = EvalRecord(
        "gemm", problem.to_dict(), config.as_dict(), Status.OK, timing=Timing((1.0,)), device=launcher.device_info()
    )
    with WinnersDB(tmp_path / "winners.sqlite") as db:
        assert db.put(WinnerKey.of(record, gemm.source_hash(), problem.key(), problem.dtype), record)
    results = []
    for _ in range(launches):
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        served = launcher("gemm", {"A": a, "B": b, "D": d}, use="tunebox")
        torch.cuda.synchronize()
        assert all(served.config[key] == value for key, value in config.as_dict().items()), served.config
        results.append(d)
    want = a.double() @ b.double()
    assert ((results[0].double() - want).abs() <= 1e-2 * want.abs() + 0.1).all()
    assert all(torch.equal(r, results[0]) for r in results[1:])
