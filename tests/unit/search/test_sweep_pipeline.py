"""The sweep loop's device queue, with an in-process backend: evaluations are queued ahead and
answered in order, identical binaries are evaluated once (also while the first is still queued),
and compile failures never reach the device; the surrogate hears what the compile cache holds."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import deque
from concurrent.futures import Future

import pytest
from sweep_fixtures import DEVICE

from tunebox.build.nvrtc import BuildResult
from tunebox.errors import DatabaseError
from tunebox.params import Config
from tunebox.records import EvalRecord, Status, Timing, canonical_json
from tunebox.runner.protocol import Outcome
from tunebox.search.loop import Sweep
from tunebox.search.loop_settings import LoopSettings
from tunebox.search.runs import SweepResult
from tunebox.store.evallog import EvalLog
from tunebox.sweep_spec import load_sweep

SWEEP = """
name = "queue"
family = "tile_copy"
[search]
strategy = "exhaustive"
finalists = 1
[space]
BM = [8]
BN = [128]
threads = [128]
vec_bytes = [4, 8, 16]
bounds = ["checked", "split"]
staging = ["none"]
tiles_per_block = [1]
template = ["vector"]
[[problems]]
name = "copy"
dtype = "float32"
src = [1000, 1000]
dst = [1000, 1000]
"""


def searched(strategy: str, trials: int, **lists: str) -> str:
    """SWEEP searched by ``strategy`` for ``trials`` variants, with ``lists`` (a parameter's name: its
    values as TOML, e.g. ``BM="[1, 2]"``) in place of its own."""
    text = SWEEP.replace('strategy = "exhaustive"', f'strategy = "{strategy}"\ntrials = {trials}')
    for name, values in lists.items():
        text = re.sub(rf"^{name} = .*$", f"{name} = {values}", text, flags=re.MULTILINE)
    return text


class StubBuilder:
    """Compiles nothing: vec_bytes 16 fails to compile; the others get one shared binary, or with
    ``distinct`` one binary each."""

    def __init__(self, distinct: bool = False) -> None:
        self.distinct = distinct

    def submit(self, source, label=None) -> Future[BuildResult]:
        future: Future[BuildResult] = Future()
        fails = "int VEC = 4;" in source.code  # float32, 16-byte vectors
        future.set_result(
            BuildResult(source, "sm_90", Status.COMPILE_ERROR, log="planted")
            if fails
            else BuildResult(
                source, "sm_90", Status.OK, lowered_name="k", cubin=source.code.encode() if self.distinct else b"same"
            )
        )
        return future

    def build(self, sources):
        return [self.submit(s).result() for s in sources]

    def labelled(self, prefix) -> set[str]:
        return set()

    def cached(self, source) -> bool:
        return False


class QueueBackend:
    """Records how deep its queue got; answers every evaluation OK in submission order."""

    replayed = False
    device = DEVICE

    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.submitted: list[str] = []
        self.sources: list = []  # the kernel source of each submission
        self.cutoffs: list[float | None] = []  # the screening cut-off of each submission
        self.deepest = 0
        self.prepared_before_first_submit = 0

    def answerable(self, family, problem) -> None:
        return None

    def prepare(self, family, problem, seed) -> None:
        self.prepared_before_first_submit += not self.submitted

    def submit(self, evaluation) -> None:
        self.sources.append(evaluation.build.source)
        self.queue.append(evaluation.config.label())
        self.submitted.append(evaluation.config.label())
        self.cutoffs.append(evaluation.cutoff_ms)
        self.deepest = max(self.deepest, len(self.queue))

    def next_outcome(self) -> Outcome:
        self.queue.popleft()
        return Outcome(Status.OK, samples_ms=(1.0,) * 10, stage_seconds={"verify": 0.001, "time": 0.01})

    def retime(self, family, problem, items, seed):
        return [Outcome(Status.OK, samples_ms=(1.0,) * 10) for _ in items] + [Outcome(Status.INVALID, "none")]

    def close(self) -> None:
        pass


class SlowFirstBuilder(StubBuilder):
    """Each variant its own binary; the first submitted compile finishes only once the device was
    given ``others`` evaluations (a thread completes it), the others at once."""

    def __init__(self, device: QueueBackend, others: int) -> None:
        super().__init__(distinct=True)
        self.device, self.others = device, others
        self.first: Future[BuildResult] | None = None

    def submit(self, source, label=None) -> Future[BuildResult]:
        done = super().submit(source)
        if self.first is not None:
            return done
        self.first = Future()
        first, result = self.first, done.result()

        def finish() -> None:  # (or after 5 s, so that no run can hang on it)
            for _ in range(500):
                if len(self.device.submitted) >= self.others:
                    break
                threading.Event().wait(0.01)
            first.set_result(result)

        threading.Thread(target=finish, daemon=True).start()
        return first


def sweep(
    tmp_path, builder: StubBuilder, backend: QueueBackend | None = None
) -> tuple[QueueBackend, SweepResult, list]:
    path = tmp_path / "queue.toml"
    path.write_text(SWEEP)
    backend = backend or QueueBackend()
    result = Sweep(
        load_sweep(path),
        backend,
        builder,
        tmp_path / "out",
        tmp_path / "w.sqlite",
        settings=LoopSettings(device_queue=2),
    ).run()
    screened = [r for r in EvalLog(tmp_path / "out" / "evals.jsonl").read() if r.phase == "screen"]
    return backend, result, screened


def test_identical_binaries_reach_the_device_once_and_failures_never(tmp_path):
    backend, result, records = sweep(tmp_path, StubBuilder())
    ok = [r for r in records if r.status is Status.OK]
    assert len(records) == 6 and len(ok) == 4
    assert {r.status for r in records if r.config["vec_bytes"] == 16} == {Status.COMPILE_ERROR}
    assert len(backend.submitted) == 1 and result.evaluated == 1  # four variants, one binary
    assert sum("identical binary to" in r.message for r in ok) == 3


def test_the_next_evaluation_is_queued_while_one_runs(tmp_path):
    backend, result, records = sweep(tmp_path, StubBuilder(distinct=True))
    assert len(backend.submitted) == result.evaluated == 4 and backend.deepest == 2
    assert backend.prepared_before_first_submit == 1  # the problem's inputs are asked for up front
    summary = result.summary()  # device seconds over the window from the first answer to the last
    assert summary["steady_device_busy"] == pytest.approx(3 * 0.011 / summary["steady_seconds"])
    assert 0 < summary["first_answer_seconds"] <= summary["seconds"] - summary["steady_seconds"]
    answered = [Config(tuple(sorted(r.config.items()))).label() for r in records if r.status is Status.OK]
    assert answered == backend.submitted  # logged in the order the device answered


def test_the_cutoff_follows_the_best_time_so_far(tmp_path):
    """No cut-off before the first answer (two submitted at once); then 1.5 x its 1.0 ms."""
    backend, _, _ = sweep(tmp_path, StubBuilder(distinct=True))
    assert backend.cutoffs == [None, None, 1.5, 1.5]


def test_cutoff_zero_times_every_variant_in_full(tmp_path):
    (tmp_path / "queue.toml").write_text(SWEEP.replace("[search]", "[search]\ncutoff = 0"))
    backend = QueueBackend()
    spec = load_sweep(tmp_path / "queue.toml")
    Sweep(spec, backend, StubBuilder(distinct=True), tmp_path / "o", tmp_path / "w").run()
    assert backend.cutoffs == [None] * 4


def test_a_logged_config_the_space_no_longer_holds_is_never_a_finalist(tmp_path):
    """A log written before the space changed (here: a flat configuration of before templates)
    resumes: the old record, though fastest, is neither counted as done nor re-timed as a finalist."""
    (tmp_path / "queue.toml").write_text(SWEEP)
    spec = load_sweep(tmp_path / "queue.toml")
    problem = spec.problems[0].problem
    current = next(iter(spec.space)).as_dict()
    older = {**{k: v for k, v in current.items() if k != "template"}, "transport": "vector"}
    (tmp_path / "out").mkdir()
    EvalLog(tmp_path / "out" / "evals.jsonl").append(
        EvalRecord("tile_copy", problem.to_dict(), older, Status.OK, timing=Timing((0.001,) * 10), device=DEVICE)
    )
    backend, result, records = sweep(tmp_path, StubBuilder(distinct=True))
    assert result.evaluated == 4  # every current variant ran
    winner = result.problems[0].winner
    assert winner is not None and set(winner.config) == set(current) and winner.median_ms == 1.0


def test_the_default_strategy_runs_ahead_of_its_answers_by_the_ramp_then_the_depth(tmp_path):
    """The surrogate through the loop: before the first answer only 2 variants are asked (the ramp),
    later never more than 24 in flight; every variant of the budget is evaluated once."""

    class Watching(QueueBackend):
        def __init__(self) -> None:
            super().__init__()
            self.submitted_before_answer: list[int] = []

        def next_outcome(self) -> Outcome:
            self.submitted_before_answer.append(len(self.submitted))
            return super().next_outcome()

    sweep_file = searched("surrogate", 40, BM="[1, 2, 4, 8, 16, 32, 64]", BN="[64, 128, 256, 512]")
    (tmp_path / "queue.toml").write_text(sweep_file)
    backend = Watching()
    spec = load_sweep(tmp_path / "queue.toml")
    Sweep(spec, backend, StubBuilder(distinct=True), tmp_path / "o", tmp_path / "w").run()
    screened = [r for r in EvalLog(tmp_path / "o" / "evals.jsonl").read() if r.phase == "screen"]
    assert len({Config(tuple(sorted(r.config.items()))) for r in screened}) == len(screened) == 40
    assert len(set(backend.submitted)) == len(backend.submitted)  # compile failures never reach it
    assert backend.submitted_before_answer[0] <= 2
    answered = range(len(backend.submitted_before_answer))
    assert all(s - a <= 24 for s, a in zip(backend.submitted_before_answer, answered, strict=True))


class HarnessFailingBackend(QueueBackend):
    """Answers the first evaluation with a harness error, as the worker does when a family's
    reference raises."""

    def next_outcome(self) -> Outcome:
        self.queue.popleft()
        return Outcome(
            Status.HARNESS_ERROR,
            "tunebox's own code failed while preparing (not a kernel fault):\n"
            "Traceback (most recent call last):\nKeyError: 'dst'",
        )


def test_a_harness_error_stops_the_sweep_at_once_and_stores_nothing(tmp_path):
    from tunebox.errors import HarnessError

    path = tmp_path / "queue.toml"
    path.write_text(SWEEP)
    backend = HarnessFailingBackend()
    with pytest.raises(HarnessError, match="KeyError: 'dst'"):
        Sweep(
            load_sweep(path),
            backend,
            StubBuilder(distinct=True),
            tmp_path / "out",
            tmp_path / "w.sqlite",
            settings=LoopSettings(device_queue=2),
        ).run()
    assert len(backend.submitted) <= 2  # the queue's depth, never the budget (4)
    log = tmp_path / "out" / "evals.jsonl"
    assert not log.exists() or EvalLog(log).read() == []
    assert not (tmp_path / "w.sqlite").exists()


def test_a_slow_compile_does_not_hold_back_those_started_after_it(tmp_path):
    """The first variant asked compiles last: the loop sends the others to the device as their
    compiles finish, and the first one after them (before: in ask order, the first one first)."""
    device = QueueBackend()
    builder = SlowFirstBuilder(device, others=3)  # the space's other variants that compile
    backend, result, _ = sweep(tmp_path, builder, device)
    assert builder.first is not None and len(backend.submitted) == result.evaluated == 4
    assert backend.sources[-1] == builder.first.result().source


class CacheAwareBuilder(StubBuilder):
    """A cache whose labels name ``labelled`` configurations (canonical JSON, for any problem) and
    that holds the variants with 8-byte vectors; keeps what it was asked."""

    def __init__(self, labelled: set[str] = frozenset()) -> None:
        super().__init__(distinct=True)
        self.labels = set(labelled)
        self.asked: list[str] = []

    def labelled(self, prefix) -> set[str]:
        return self.labels

    def cached(self, source) -> bool:
        self.asked.append(source.code)
        return self.holds(source)

    @staticmethod
    def holds(source) -> bool:
        return "int VEC = 2;" in source.code  # float32, 8-byte vectors


def every_config(path) -> set[str]:
    return {canonical_json(c.as_dict()) for c in load_sweep(path).space}


def test_the_surrogate_is_told_what_the_compile_cache_holds(tmp_path, monkeypatch):
    from tunebox.search import loop

    told: list[list] = []
    real = loop.SurrogateStrategy

    def spy(*args, built=(), **kwargs):
        told.append([c["vec_bytes"] for c in built])
        return real(*args, built=built, **kwargs)

    monkeypatch.setattr(loop, "SurrogateStrategy", spy)
    (tmp_path / "queue.toml").write_text(searched("surrogate", 6))
    builder = CacheAwareBuilder(every_config(tmp_path / "queue.toml"))
    Sweep(load_sweep(tmp_path / "queue.toml"), QueueBackend(), builder, tmp_path / "o", tmp_path / "w").run()
    assert len(builder.asked) == 6  # every valid configuration labelled, once, as the problem starts
    assert told == [[8, 8]]  # the two 8-byte variants (checked and split bounds)


def test_the_cache_is_asked_only_about_labelled_configurations(tmp_path):
    """The loop renders a source to ask the cache only for the configurations its labels name (none
    on a cold cache: a sweep's start renders nothing extra)."""
    (tmp_path / "queue.toml").write_text(searched("surrogate", 6))
    spec = load_sweep(tmp_path / "queue.toml")
    eight = {canonical_json(c.as_dict()) for c in spec.space if c["vec_bytes"] == 8}
    for labelled, asked in ((set(), 0), (eight, 2)):  # 2: the valid ones (checked and split bounds)
        builder = CacheAwareBuilder(labelled)
        result = Sweep(spec, QueueBackend(), builder, tmp_path / f"o{asked}", tmp_path / "w").run()
        assert len(builder.asked) == asked and result.evaluated > 0


def test_a_compile_is_labelled_with_its_family_problem_and_configuration(tmp_path):
    """The loop's compiles carry the label ``labelled`` finds them by: family, its sources' hash,
    problem, configuration."""

    class Labels(StubBuilder):
        def __init__(self) -> None:
            super().__init__()
            self.labels: list[str] = []

        def submit(self, source, label=None) -> Future[BuildResult]:
            self.labels.append(label)
            return super().submit(source, label)

    (tmp_path / "queue.toml").write_text(searched("surrogate", 6))
    spec = load_sweep(tmp_path / "queue.toml")
    builder = Labels()
    result = Sweep(spec, QueueBackend(), builder, tmp_path / "o", tmp_path / "w").run()
    problem = spec.problems[0].problem
    head = f"{spec.family.name}\t{spec.family.source_hash()}\t{problem.key()}\t"
    labels = [label for label in builder.labels if label is not None]  # the finalists' rebuilds: none
    assert len(labels) >= result.evaluated > 0 and all(label.startswith(head) for label in labels)
    assert {label[len(head) :] for label in labels} <= every_config(tmp_path / "queue.toml")


class SlowNthBuilder(StubBuilder):
    """Each variant its own binary; the ``nth`` compile submitted finishes only when ``finish`` is set
    (a thread completes it then), the others at once."""

    def __init__(self, nth: int, finish: threading.Event) -> None:
        super().__init__(distinct=True)
        self.nth, self.finish, self.count = nth, finish, 0
        self.slow: Future[BuildResult] | None = None
        self.slow_source = None

    def submit(self, source, label=None) -> Future[BuildResult]:
        done = super().submit(source)
        self.count += 1
        if self.count != self.nth:
            return done
        self.slow, self.slow_source, result = Future(), source, done.result()
        slow = self.slow

        def finish() -> None:
            if self.finish.wait(5.0) and slow.set_running_or_notify_cancel():
                slow.set_result(result)

        threading.Thread(target=finish, daemon=True).start()
        return slow


@pytest.mark.parametrize("spare", [8, 0])
def test_a_problem_ends_on_the_first_compiles_to_finish_not_a_slow_last_one(tmp_path, spare):
    """The last of a budget's asks compiles slowly: with spare asks the budget's last evaluations are
    the spare variants that compiled, and the slow compile is cancelled, never waited for; without
    them the loop waits for it (it finishes once the device has had the other nine)."""
    every_compiles = {"BM": "[1, 2, 4, 8, 16, 32, 64]", "BN": "[64, 128, 256, 512]", "vec_bytes": "[4, 8]"}
    (tmp_path / "queue.toml").write_text(searched("random", 10, **every_compiles))
    finish = threading.Event()

    class Finishing(QueueBackend):  # lets the slow compile finish once nine variants reached the device
        def submit(self, evaluation) -> None:
            super().submit(evaluation)
            if len(self.submitted) == 9:
                finish.set()

    backend = Finishing()
    builder = SlowNthBuilder(10, finish if not spare else threading.Event())
    settings = LoopSettings(device_queue=2, spare_asks=spare)
    result = Sweep(
        load_sweep(tmp_path / "queue.toml"), backend, builder, tmp_path / "o", tmp_path / "w", settings=settings
    ).run()
    assert builder.slow is not None and result.evaluated == len(set(backend.submitted)) == 10
    if spare:  # cancelled, never evaluated: spare variants asked after it took its place
        assert builder.slow.cancelled() and builder.slow_source not in backend.sources
    else:
        assert backend.sources[-1] == builder.slow_source


class HeldCompilesBuilder(CacheAwareBuilder):
    """The 8-byte variants are in its cache (``load`` reads them); every other compile finishes only
    once ``release`` is set (or after 5 s, so that no run can hang on it)."""

    def __init__(self, release: threading.Event, labelled: set[str]) -> None:
        super().__init__(labelled)
        self.release = release

    def load(self, source) -> BuildResult | None:
        return StubBuilder.submit(self, source).result() if self.holds(source) else None

    def submit(self, source, label=None) -> Future[BuildResult]:
        result, held = super().submit(source).result(), Future()
        threading.Thread(target=lambda: (self.release.wait(5.0), held.set_result(result)), daemon=True).start()
        return held


def test_the_device_runs_built_variants_while_the_asked_ones_compile(tmp_path, monkeypatch):
    """The strategy's asks are all uncompiled and their compiles held until the device has had three
    evaluations: the loop runs the strategy's built picks meanwhile (before: it waited for the compiles)."""
    from tunebox.search import loop

    class PlainUnbuilt:  # plain asks: the 4-byte variants; built asks: the cache's 8-byte ones
        def __init__(self, space, valid, seed, history=(), seeds=(), built=()) -> None:
            self.plain = [c for c in valid if c["vec_bytes"] == 4]
            self.built = list(built)

        def seed(self, config) -> None:
            pass

        def ask(self):
            return loop.Ask(None, self.plain.pop(0).as_dict()) if self.plain else None

        def ask_built(self):
            return loop.Ask(None, self.built.pop(0).as_dict()) if self.built else None

        def tell(self, ask, record) -> None:
            pass

    monkeypatch.setattr(loop, "SurrogateStrategy", PlainUnbuilt)
    release = threading.Event()

    class Releasing(QueueBackend):
        def submit(self, evaluation) -> None:
            super().submit(evaluation)
            if len(self.submitted) == 3:
                release.set()

    (tmp_path / "queue.toml").write_text(searched("surrogate", 8, BM="[1, 2, 4, 8]", vec_bytes="[4, 8]"))
    backend = Releasing()
    run = Sweep(
        load_sweep(tmp_path / "queue.toml"),
        backend,
        HeldCompilesBuilder(release, every_config(tmp_path / "queue.toml")),
        tmp_path / "o",
        tmp_path / "w",
    )
    result = run.run()
    assert all(CacheAwareBuilder.holds(s) for s in backend.sources[:3])  # built, run while the others compiled
    assert result.evaluated == len(set(backend.submitted)) == 8
    assert run.breakdown.get("compile_wait", 0.0) < 2.0


def test_a_space_larger_than_the_limit_is_sampled_with_the_default_kept(tmp_path, monkeypatch):
    """With more configurations than ``LoopSettings.enumerated`` the strategy chooses among that many
    drawn (the valid ones) and the problem's default; the sweep still evaluates its budget."""
    from tunebox.search import loop

    pools: list[list] = []
    real = loop.SurrogateStrategy

    def spy(space, valid, *args, **kwargs):
        pools.append(list(valid))
        return real(space, valid, *args, **kwargs)

    monkeypatch.setattr(loop, "SurrogateStrategy", spy)
    lists = {"BM": "[1, 2, 4, 8, 16, 32, 64]", "BN": "[128, 256]", "threads": "[128, 256]"}  # the default's too
    (tmp_path / "queue.toml").write_text(searched("surrogate", 2, **lists))
    spec = load_sweep(tmp_path / "queue.toml")
    settings = LoopSettings(enumerated=5)
    result = Sweep(spec, QueueBackend(), StubBuilder(), tmp_path / "o", tmp_path / "w", settings=settings).run()
    default = spec.family.default_config(spec.problems[0].problem)
    assert spec.space.size() == 168 and len(pools) == 1 and len(pools[0]) <= 5 + 1
    assert default in pools[0] and sum(result.problems[0].counts.values()) == 2  # the budget, the default first


class FastestAt4(QueueBackend):
    """Every variant measures 1 ms but those with BM = 4, 0.5 ms."""

    def next_outcome(self) -> Outcome:
        label = self.queue.popleft()
        return Outcome(Status.OK, samples_ms=(0.5 if "BM=4 " in label else 1.0,) * 10)


def rerecorded_first(tmp_path, between=lambda: None) -> tuple[str, list[str]]:
    """A 30-trial sweep stores BM = 4 as its winner; ``between`` runs; a 2-trial re-run of the same sweep into a
    fresh directory beside the same winners database: (the winner's label, the re-run's evaluations in order)."""
    (tmp_path / "queue.toml").write_text(searched("surrogate", 30, BM="[1, 2, 4, 8, 16, 32, 64]"))
    spec = load_sweep(tmp_path / "queue.toml")
    winner = Sweep(spec, FastestAt4(), StubBuilder(), tmp_path / "o1", tmp_path / "w").run().problems[0].winner
    assert winner is not None and winner.config["BM"] == 4
    between()
    (tmp_path / "queue.toml").write_text(searched("surrogate", 2, BM="[1, 2, 4, 8, 16, 32, 64]"))
    again = FastestAt4()
    Sweep(load_sweep(tmp_path / "queue.toml"), again, StubBuilder(), tmp_path / "o2", tmp_path / "w").run()
    return spec.space.validate(winner.config).label(), again.submitted


def test_a_rerun_measures_the_stored_winner_among_its_first(tmp_path):
    """A sweep run again into a fresh directory beside the same winners database (a re-recording)
    measures the problem's stored winner among its first evaluations, so it cannot lose sight of it."""
    winner, evaluated = rerecorded_first(tmp_path)
    assert winner in evaluated[:2]


def test_a_rerecording_after_a_kernel_change_measures_the_stale_winner_among_its_first(tmp_path):
    """The problem's winner stored under the family's older sources (a change of its kernels voided it)
    is measured again among a re-recording's first evaluations, beside the default."""

    def kernels_changed() -> None:
        with sqlite3.connect(tmp_path / "w") as raw:  # the winners database
            assert raw.execute("UPDATE winners SET family_hash = 'older'").rowcount == 1
        raw.close()

    winner, evaluated = rerecorded_first(tmp_path, kernels_changed)
    assert winner in evaluated[:2]


class ReplayedQueueBackend(QueueBackend):
    replayed = True


def test_a_replayed_sweep_refuses_a_database_of_measured_winners_before_any_work(tmp_path):
    sweep(tmp_path, StubBuilder())  # measured winners in w.sqlite
    before = (tmp_path / "w.sqlite").read_bytes()
    backend = ReplayedQueueBackend()
    with pytest.raises(DatabaseError, match=r"holds 1 measured winner.*Name another database"):
        Sweep(
            load_sweep(tmp_path / "queue.toml"), backend, StubBuilder(), tmp_path / "replay", tmp_path / "w.sqlite"
        ).run()
    assert backend.submitted == [] and not (tmp_path / "replay" / "evals.jsonl").exists()
    assert (tmp_path / "w.sqlite").read_bytes() == before


def test_a_damaged_database_is_refused_before_any_work(tmp_path):
    path = tmp_path / "queue.toml"
    path.write_text(SWEEP)
    (tmp_path / "w.sqlite").write_text("not a database\n")
    backend = QueueBackend()
    with pytest.raises(DatabaseError, match="not a readable SQLite database"):
        Sweep(load_sweep(path), backend, StubBuilder(), tmp_path / "out", tmp_path / "w.sqlite").run()
    assert backend.submitted == [] and (tmp_path / "w.sqlite").read_text() == "not a database\n"
