"""Compiles in killable helper processes: a compile past its timeout is killed and recorded as a
timeout, and the builder keeps compiling afterwards; a close that abandons running compiles stops them
at once and caches nothing for them."""

from __future__ import annotations

import time

import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families.base import KernelSource
from tunebox.records import Status

GOOD = KernelSource('extern "C" __global__ void ok(float* x) { x[threadIdx.x] += 1.0f; }', "ok", ())
TWICE = KernelSource('extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }', "twice", ())
BAD = KernelSource('extern "C" __global__ void bad(float* x) { x[threadIdx.x] += undeclared; }', "bad", ())


def slow_source(statements: int = 30000) -> KernelSource:
    """About 20 s of ptxas work on this machine: a compile that runs far past a 3 s timeout."""
    body = "".join(f"  a = a * x[{i % 61}] + {i % 7}.0f;\n" for i in range(statements))
    code = 'extern "C" __global__ void slow(float* x) {\n  float a = x[threadIdx.x];\n' + body + "  x[0] = a;\n}\n"
    return KernelSource(code, "slow", ())


def test_a_compile_past_its_timeout_is_killed_and_the_builder_goes_on():
    builder = NvrtcBuilder("sm_90", timeout_s=3.0, workers=1)
    try:
        assert builder.build_one(GOOD).status is Status.OK  # helper started and warm
        start = time.monotonic()
        slow = builder.build_one(slow_source())
        assert time.monotonic() - start < 10
        assert slow.status is Status.TIMEOUT and "killed after 3 s" in slow.log
        after = builder.build_one(GOOD.__class__(GOOD.code.replace("1.0f", "2.0f"), "ok", ()))
        assert after.status is Status.OK and after.cubin.startswith(b"\x7fELF")
    finally:
        builder.close()


def test_isolated_and_in_process_compiles_agree():
    isolated = NvrtcBuilder("sm_90", timeout_s=60.0, workers=2)
    local = NvrtcBuilder("sm_90")
    try:
        a, b = isolated.build_one(GOOD), local.build_one(GOOD)
        assert a.status is b.status is Status.OK and a.lowered_name == b.lowered_name and a.registers == b.registers
        broken = KernelSource("this is not C++", "ok", ())
        assert isolated.build_one(broken).status is Status.COMPILE_ERROR
    finally:
        isolated.close()
        local.close()


def test_the_cache_says_what_it_holds(tmp_path):
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    other = GOOD.__class__(GOOD.code.replace("1.0f", "3.0f"), "ok", ())
    try:
        assert not builder.cached(GOOD) and not builder.cached(other)
        assert builder.build_one(GOOD).status is Status.OK
        assert builder.cached(GOOD) and not builder.cached(other)
        assert not NvrtcBuilder("sm_90").cached(GOOD)  # no disk cache: nothing is held
    finally:
        builder.close()


def test_helpers_that_do_not_stop_are_killed_together(monkeypatch):
    """close() tells every helper at once and gives them STOP_S between them, not each in turn: four
    helpers that never exit cost one STOP_S, then are killed."""
    import multiprocessing as mp

    from tunebox.build import isolated

    monkeypatch.setattr(isolated, "STOP_S", 0.5)
    compiler = isolated.IsolatedCompiler(timeout_s=60.0)
    ctx = mp.get_context("spawn")
    for _ in range(4):
        parent, _child = ctx.Pipe()
        proc = ctx.Process(target=time.sleep, args=(60,), daemon=True)
        proc.start()
        compiler._helpers.append((proc, parent))
    procs = [proc for proc, _ in compiler._helpers]
    start = time.monotonic()
    compiler.close()
    assert time.monotonic() - start < 1.5  # in turn: 4 x STOP_S at least
    assert not any(proc.is_alive() for proc in procs) and compiler._helpers == []


def test_a_stored_compile_keeps_its_label(tmp_path):
    """A compile stored with a label is found by its prefix (a compile error, a cache hit or a builder
    without a disk cache adds none); a line of another prefix is not."""
    assert NvrtcBuilder("sm_90").labelled("") == set()  # no disk cache
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path / "cubin")
    try:
        assert builder.labelled("fam\t") == set()  # the folder not made yet
        assert builder.build_one(GOOD, "fam\tA").status is Status.OK
        assert builder.build_one(GOOD, "fam\tagain").cache_hit  # a hit: compiled before, not labelled again
        assert builder.build_one(BAD, "fam\tB").status is Status.COMPILE_ERROR
        assert builder.submit(GOOD, "other\tC").result().cache_hit
        assert builder.labelled("fam\t") == {"A"} and builder.cached(GOOD)
        with pytest.raises(ValueError, match="one line"):
            builder.build_one(TWICE, "two\nlines")
    finally:
        builder.close()


def test_an_abandoning_close_stops_a_running_compile_at_once(tmp_path):
    """close(abandon=True) kills the helper of a compile in progress (about 20 s of work) instead of
    waiting for it: the compile's future fails, nothing is cached, and the closed pool compiles nothing
    more."""
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path / "cubin", timeout_s=60.0, workers=1)
    assert builder.build_one(GOOD).status is Status.OK  # the helper started
    running = builder.submit(slow_source())
    time.sleep(1.0)  # in ptxas
    start = time.monotonic()
    builder.close(abandon=True)
    assert time.monotonic() - start < 2.0
    result = running.result(timeout=5)
    assert result.status is Status.COMPILE_ERROR and "died" in result.log
    assert not builder.cached(slow_source()) and builder.cached(GOOD)
    assert builder._isolated is not None
    refused = builder._isolated.compile(GOOD, "sm_90", [])
    assert refused.status is Status.COMPILE_ERROR and "closed" in refused.log
