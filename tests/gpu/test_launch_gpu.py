"""tunebox.launch on torch tensors: the tuned variant runs on the caller's arrays and stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebox.errors import InvalidProblem
from tunebox.runtime.launch import Launcher

pytestmark = pytest.mark.gpu
WINNERS = Path(__file__).resolve().parents[2] / "results" / "winners.sqlite"


@pytest.fixture(scope="module")
def torch():
    import torch  # on the GPU host only: the gpu marker's probe gates these tests

    return torch


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    return Launcher(WINNERS, cache_dir=tmp_path_factory.mktemp("cubins"))


def test_exact_winner_copies(launcher, torch):
    a = torch.randn(16384, 16384, device="cuda")
    b = torch.full_like(a, float("nan"))
    answer = launcher("tile_copy", {"src": a, "dst": b}, use="tunebox")
    torch.cuda.synchronize()
    assert answer.source == "exact"
    assert torch.equal(a, b)


def test_unseen_shape_transposes_with_padding(launcher, torch):
    a = torch.randn(1001, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.empty(780, 1003, device="cuda", dtype=torch.bfloat16)
    answer = launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True, padding="neg_inf")
    torch.cuda.synchronize()
    assert answer.source in ("nearest", "default")
    expected = torch.full((780, 1003), float("-inf"), device="cuda", dtype=torch.bfloat16)
    expected[:777, :1001] = a.t()
    assert torch.equal(b, expected)


def test_shape_mismatch_is_refused(launcher, torch):
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(Exception, match="dst"):
        launcher("tile_copy", {"src": a, "dst": torch.empty(64, 64, device="cuda", dtype=torch.float16)})


def test_gather_launch_checks_indices_unless_promised(launcher, torch):
    """No promise: -1 and out-of-range indices read the padding; the tuned winner (an unchecked one for
    the all-valid benchmark problem) is re-validated and replaced by a checked variant."""
    a = torch.randn(4096, 512, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, 4096, (8192,), device="cuda", dtype=torch.int32)
    idx[::7] = -1
    idx[1::11] = 5000
    out = torch.empty(8192, 512, device="cuda", dtype=torch.bfloat16)
    answer = launcher("gather", {"A": a, "idx": idx, "out": out}, use="tunebox")
    torch.cuda.synchronize()
    assert answer.config["check_bounds"] == "true"
    valid = (idx >= 0) & (idx < 4096)
    expected = a[idx.clamp(0, 4095).long()].masked_fill_(~valid[:, None], 0)
    assert torch.equal(out, expected)


def test_scatter_and_ragged_and_gemm_launch(launcher, torch):
    v = torch.randn(1000, 64, device="cuda")
    idx = torch.randperm(3000, device="cuda")[:1000].to(torch.int32)
    dst = torch.zeros(3000, 64, device="cuda")
    launcher("scatter", {"V": v, "idx": idx, "A": dst}, check_bounds=False)
    expected = torch.zeros_like(dst).index_copy_(0, idx.long(), v)
    lengths = [3, 0, 17]
    x = torch.randn(3, 17, 2, 8, device="cuda", dtype=torch.bfloat16)
    offsets = torch.tensor([0, 3, 3, 20], device="cuda", dtype=torch.int64)
    packed = torch.empty(20, 2, 8, device="cuda", dtype=torch.bfloat16)
    launcher("ragged3d", {"x": x, "offsets": offsets, "out": packed}, lengths=lengths)
    a = torch.randn(65, 73, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(73, 97, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(65, 97, device="cuda", dtype=torch.float32)
    launcher("gemm", {"A": a, "B": b, "D": d}, use="tunebox")
    torch.cuda.synchronize()
    assert torch.equal(dst, expected)
    assert torch.equal(packed, torch.cat([x[0, :3], x[2, :17]]))
    torch.testing.assert_close(d, a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("path", ["padded", "wgmma", "padded_persistent"])
def test_gemm_launch_through_tensor_maps(tmp_path, torch, path):
    """A stored wgmma winner runs on caller tensors: tensor maps encoded on the caller's addresses,
    the padded paths' workspace allocated by the launcher, D's padding column left alone."""
    from tunebox.families import get
    from tunebox.records import EvalRecord, Status, Timing, WinnerKey
    from tunebox.runtime.arrays import device_array
    from tunebox.store.winners import WinnersDB

    gemm = get("gemm")
    m, n, k = (1000, 512, 776) if path == "wgmma" else (1001, 515, 777)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    d = torch.full((m, n + 1), 7.0, device="cuda", dtype=torch.bfloat16)
    problem = gemm.problem_from_arrays({"A": device_array(a), "B": device_array(b), "D": device_array(d)}, K=k, N=n)
    config: dict[str, object] = {"template": path, "BM": 128, "BN": 128, "stages": 3}
    if path == "padded_persistent":  # the persistent kernel on pad_rows copies, D stored directly
        config |= {"schedule": "pingpong", "raster": "m", "group": 8, "epilogue": "direct"}
        config |= {"producer_registers": 40, "consumer_registers": 232, "splits": 1}
    else:
        config |= {"bounds": "true", "consumers": 1, "tiles_per_block": 2}
    gemm.check(problem, gemm.config(config))
    launcher = Launcher(tmp_path / "winners.sqlite", cache_dir=tmp_path / "cubins")
    record = EvalRecord(
        "gemm", problem.to_dict(), config, Status.OK, timing=Timing((1.0, 1.0, 1.0)), device=launcher.device_info()
    )
    with WinnersDB(tmp_path / "winners.sqlite") as db:
        assert db.put(WinnerKey.of(record, gemm.source_hash(), problem.key(), problem.dtype), record)
    for _ in range(2):  # the second call reuses the launches bound to these addresses
        answer = launcher("gemm", {"A": a, "B": b, "D": d}, use="tunebox", K=k, N=n)
    torch.cuda.synchronize()
    assert answer.source == "exact" and answer.config["template"] == path
    want = a.double() @ b.double()
    got = d[:, :n].double()
    assert ((got - want).abs() <= 1e-2 * want.abs() + 0.1).all()
    assert (d[:, n] == 7.0).all()
    d2 = torch.full_like(d, 7.0)  # new addresses: the tensor maps are encoded again on them
    launcher("gemm", {"A": a.clone(), "B": b.clone(), "D": d2}, use="tunebox", K=k, N=n)
    torch.cuda.synchronize()
    assert torch.equal(d2, d)


def test_auto_serves_the_library_where_no_variant_is_known_to_beat_it(launcher, torch):
    """gemm at a shape no sweep tuned: the nearest winner proves nothing here, so torch.matmul runs,
    in place on the caller's D, and the answer says so."""
    from tunebox.families import get
    from tunebox.runtime.serving import library_form

    a = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(1000, 1000, device="cuda", dtype=torch.bfloat16)
    served = launcher("gemm", {"A": a, "B": b, "D": d})
    torch.cuda.synchronize()
    assert (served.ran, served.source, served.library) == ("library", "library", "torch: torch.matmul(A, B)")
    assert torch.equal(d, torch.matmul(a, b))
    gemm = get("gemm")
    assert library_form(gemm, gemm.parse_problem({"M": 8, "N": 8, "K": 8, "relu": True})) is None


def test_repeated_calls_take_the_fast_path_on_new_addresses(launcher, torch):
    """The second call with new tensors of the same shapes reuses the plan and rewrites only the
    argument struct's addresses; both results are right."""
    for _ in range(3):
        a = torch.randn(1001, 777, device="cuda")
        b = torch.empty(777, 1001, device="cuda")
        served = launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
        torch.cuda.synchronize()
        assert served.ran == "kernel" and torch.equal(b, a.t())


def test_a_bound_launch_runs_again_on_its_tensors_and_follows_their_changes(launcher, torch):
    """``bind`` launches once and returns the call bound to its tensors: new data in the same tensors is
    transposed right on each call (the fast entry); a tensor swapped in place for another of a new shape
    (``set_``) goes through the full path, which plans the new problem; another current stream is
    launched on."""
    a = torch.randn(1001, 777, device="cuda")
    b = torch.empty(777, 1001, device="cuda")
    again = launcher.bind("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        b.fill_(float("nan"))
        served = again()
        torch.cuda.synchronize()
        assert served.ran == "kernel" and torch.equal(b, a.t())
    a.set_(torch.randn(300, 200, device="cuda"))  # same tensor objects, another address and shape
    b.set_(torch.empty(200, 300, device="cuda"))
    assert again().ran == "kernel"
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a.copy_(torch.randn_like(a))
        again()
    side.synchronize()
    assert torch.equal(b, a.t())


def test_a_misaligned_view_never_reaches_a_kernel(launcher, torch):
    """Views that start 4 bytes into their storage: "auto" serves the library call (right results,
    the fast path too), "tunebox" is refused with what to pass; aligned calls with the same shapes
    still run the kernel and the context stays healthy (a misaligned vector access would poison it)."""
    a = torch.randn(1001 * 777 + 1, device="cuda")[1:].view(1001, 777)
    b = torch.empty(777 * 1001 + 1, device="cuda")[1:].view(777, 1001)
    assert a.data_ptr() % 16 and b.data_ptr() % 16
    for _ in range(2):  # the second call on the fast path
        b.fill_(float("nan"))
        served = launcher("tile_copy", {"src": a, "dst": b}, transpose=True)
        torch.cuda.synchronize()
        assert served.ran == "library" and "src, dst are not 16-byte aligned" in served.explanation
        assert torch.equal(b, a.t())
    with pytest.raises(InvalidProblem, match="src is not 16-byte aligned"):
        launcher("tile_copy", {"src": a, "dst": torch.empty(777, 1001, device="cuda")}, use="tunebox", transpose=True)
    aligned = a.clone()
    out = torch.empty(777, 1001, device="cuda")
    served = launcher("tile_copy", {"src": aligned, "dst": out}, use="tunebox", transpose=True)
    torch.cuda.synchronize()
    assert served.ran == "kernel" and torch.equal(out, a.t())


def test_launch_inside_cuda_graph_capture(launcher, torch):
    """After one call outside (the plan exists), a launch is captured into a torch CUDA graph and
    replays on the captured addresses."""
    a = torch.randn(513, 257, device="cuda")
    b = torch.empty(257, 513, device="cuda")
    launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
    a.copy_(torch.randn_like(a))
    b.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())


def test_first_call_races_and_later_launchers_reuse_the_result(tmp_path, torch):
    """tune='first_call': an untuned gemm shape races the portfolio and torch.matmul on the caller's
    inputs; the served side is the faster verified one, kept in the raced database, where a new
    launcher finds it without racing again."""
    raced = tmp_path / "raced.sqlite"
    a = torch.randn(1537, 999, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(999, 2049, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(1537, 2049, device="cuda", dtype=torch.bfloat16)
    first = Launcher(WINNERS, cache_dir=tmp_path / "cubins", tune="first_call", raced=raced, race_budget_s=60)
    served = first("gemm", {"A": a, "B": b, "D": d})
    torch.cuda.synchronize()
    (result,) = first.races
    assert 0.0 < result.setup_s < result.seconds, result  # the set-up before the first candidate, within the race
    assert result.library is not None and result.library.verdict == "ok", result
    assert result.kernel is not None, result  # some portfolio kernel passed verification
    faster_kernel = result.kernel.median_ms < result.library.median_ms
    assert served.ran == ("kernel" if faster_kernel else "library"), (served, result)
    want = a.double() @ b.double()
    assert ((d.double() - want).abs() <= 1e-2 * want.abs() + 0.2).all()
    again = Launcher(WINNERS, cache_dir=tmp_path / "cubins", tune="first_call", raced=raced)
    reused = again("gemm", {"A": a, "B": b, "D": torch.empty_like(d)})
    assert again.races == [] and reused.lookup.source == "raced" and reused.ran == served.ran


def test_background_race_replaces_the_plan_when_done(tmp_path, torch, monkeypatch):
    """The first call serves the lookup's answer and races beside it; once the race is done the next
    call on the same tensors serves its result, and binds that plan's launches anew (the old plan's,
    bound to the same addresses, once kept running)."""
    import time

    from tunebox.runtime import launch

    bound: list[object] = []
    binder = launch.steps_launcher
    monkeypatch.setattr(launch, "steps_launcher", lambda stream, steps: bound.append(steps) or binder(stream, steps))
    launcher = Launcher(WINNERS, cache_dir=tmp_path / "cubins", tune="background", raced=tmp_path / "r.sqlite")
    a = torch.randn(3001, 1999, device="cuda")
    b = torch.empty(1999, 3001, device="cuda")
    first = launcher("tile_copy", {"src": a, "dst": b}, transpose=True)
    assert first.lookup.source in ("nearest", "default")
    for _ in range(600):
        if launcher.races:
            break
        time.sleep(0.05)
    assert launcher.races, "the background race did not finish in 30 s"
    time.sleep(0.1)
    before = len(bound)
    later = launcher("tile_copy", {"src": a, "dst": b}, transpose=True)
    torch.cuda.synchronize()
    assert later.lookup.source == "raced" or later.ran == "library", later
    assert later.ran == "library" or len(bound) == before + 1  # the raced plan's launches, bound anew
    assert torch.equal(b, a.t())


@pytest.mark.parametrize(
    "data",
    [
        {"dtype": "float32", "src": [300, 200], "dst": [310, 190], "origin": [-3, 5], "padding": "nan"},
        {"dtype": "bfloat16", "src": [300, 200], "dst": [190, 310], "transpose": True, "origin": [7, -2]},
        {"dtype": "float16", "src": [64, 64], "dst": [80, 80], "padding": "neg_inf"},
        {"dtype": "float32", "src": [64, 64], "dst": [70, 50], "origin": [50, -10]},  # mostly padding
        {"dtype": "bfloat16", "src": [513, 257], "dst": [257, 513], "transpose": True},
    ],
)
def test_tile_copy_library_in_place_matches_the_library_call(torch, data):
    """The in-place library form launch serves (copy_ of the window, fill_ of the borders) writes
    the bits F.pad (or copy_) gives."""
    from tunebox.families import get

    family = get("tile_copy")
    problem = family.parse_problem(data)
    (baseline,) = family.torch_baselines(problem)
    dtype = getattr(torch, problem.element)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    src = torch.randn(*problem.src, device="cuda").to(dtype)
    want = baseline.run({"src": src.view(bits)})["dst"]
    got = torch.full(tuple(problem.dst), 3.0, device="cuda", dtype=dtype)
    baseline.into({"src": src}, {"dst": got})
    assert torch.equal(got.view(bits), want.contiguous().view(bits))  # bits: NaN padding compares equal


@pytest.mark.parametrize("padding", ["zero", "nan", "neg_inf"])
def test_gather_library_in_place_matches_the_library_call(torch, padding):
    """gather's in-place library form (index_select into out, the padding written as bits) gives the
    bits of the library call the sweeps verify, for checked indices (some invalid)."""
    from tunebox.families import get

    family = get("gather")
    problem = family.parse_problem(
        {"dtype": "bfloat16", "rows": 1000, "cols": 96, "count": 700, "padding": padding, "valid_promise": False}
    )
    (baseline,) = family.torch_baselines(problem)
    a = torch.randn(1000, 96, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(-5, 1100, (700,), device="cuda", dtype=torch.int32)
    want = baseline.run({"A": a.view(torch.int16), "idx": idx})["out"]
    got = torch.empty(700, 96, device="cuda", dtype=torch.bfloat16)
    baseline.into({"A": a, "idx": idx}, {"out": got})
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
