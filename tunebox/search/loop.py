"""The sweep loop: ask, check validity, compile ahead in a pool, evaluate, tell, log; then re-time
the finalists interleaved and store the winner.

Resumable: every evaluation is appended to the evaluation log before Optuna is told, and a
configuration already in the log is told from the log instead of being evaluated again; a problem's
finalists re-timed with their baselines are logged in one write and taken from the log, unless a
baseline's record is missing (torn or lost): then they are re-timed. ``summary.json`` keeps every
run of the sweep directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from threadpoolctl import threadpool_limits

from ..build.nvrtc import BuildResult, NvrtcBuilder
from ..errors import TuneboxError
from ..families.base import Problem
from ..families.contract import Family
from ..params import Config
from ..records import EvalRecord, Status, Timing, WinnerKey, canonical_json, fastest
from ..runner.backends import Backend, Evaluation
from ..runner.protocol import Outcome, harness_checked, variant_of
from ..runner.sanitizer import Sanitizer
from ..store.evallog import EvalLog, RecordLog, check_log_family
from ..store.winner_rows import WinnerStore
from ..store.winners import WinnersDB, check_before_sweep
from ..sweep_spec import NamedProblem, SweepSpec
from .candidates import among, candidates, valid_for
from .compile_pool import without_ctrl_c
from .compiling import CompileQueue, Compiling, T
from .finalists import FinalStage
from .loop_settings import LoopSettings
from .queued import Identity, Kind, Queued, twin
from .runs import ProblemOutcome, SweepProgress, SweepResult, append_run
from .strategy import Ask, ExhaustiveStrategy, RandomStrategy, Strategy, TimedStrategy, TpeStrategy
from .surrogate import SurrogateStrategy
from .warm_start import Tuned, stored_tuned, stored_winner, warm_seeds

log = logging.getLogger(__name__)

FAILURES = {Status.COMPILE_ERROR, Status.RESOURCE_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.WRONG_RESULT}


class SweepAborted(TuneboxError):
    """Failures are systematic: the sweep stops instead of burning its budget."""


Listener = Callable[[str, EvalRecord], None]


def input_seed(base: int, problem: Problem) -> int:
    digest = hashlib.sha256(f"{base}:{problem.key()}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class Sweep:
    """One sweep over every problem of a ``SweepSpec`` (the composition root builds it)."""

    def __init__(
        self,
        spec: SweepSpec,
        backend: Backend,
        builder: NvrtcBuilder,
        out_dir: Path,
        db_path: Path,
        listeners: tuple[Listener, ...] = (),
        settings: LoopSettings | None = None,
        *,
        progress: Callable[[SweepProgress], None] | None = None,
        sanitizer: Sanitizer | None = None,
    ) -> None:
        """``sanitizer``: each problem's finalists are checked by it before a winner is stored (none:
        not checked)."""
        self.spec, self.backend, self.builder = spec, backend, builder
        self.sanitizer = sanitizer
        self.family: Family[Any] = spec.family
        self._labels_head = f"{self.family.name}\t{self.family.source_hash()}\t"  # of the compile cache's labels
        self.log: RecordLog = EvalLog(out_dir / "evals.jsonl")
        self.log_path: Path | None = out_dir / "evals.jsonl"
        self.out_dir = out_dir
        self.db_path = db_path
        self.listeners = listeners
        self.settings = settings or LoopSettings()
        # seconds: compile (summed over the pool's threads, cache misses), prepare / verify / time (in
        # the worker), final (wall time re-timing the finalists and the baseline), sanitize (wall time
        # checking finalists under compute-sanitizer)
        # the sweep's own thread: search (the strategy's asks and tells), compile_wait (blocked on a
        # compile), device_wait (blocked on the device's next answer)
        self.breakdown = {
            "compile": 0.0,
            "prepare": 0.0,
            "verify": 0.0,
            "time": 0.0,
            "final": 0.0,
            "sanitize": 0.0,
            "search": 0.0,
            "compile_wait": 0.0,
            "device_wait": 0.0,
        }
        self.answers: list[tuple[float, float]] = []
        self.started = 0.0  # perf_counter at the start of run()
        self.evaluated = 0
        self.progress = progress
        self._index = 0  # the problem under way, 1-based
        self._budgets: list[int] = []  # of the problems started: their budgets, a finished one's count
        self._run_done = 0  # variants evaluated by this invocation (compile failures included)

    def run(self) -> SweepResult:
        """Every problem in turn, then the run appended to ``summary.json``. The strategy's linear
        algebra runs on one BLAS thread: the compile pool's threads take every core, and OpenBLAS's own
        threads (one a core) only contend with them for the small matrices a model fits (200 surrogate
        asks beside a busy process a core: 4.1-5.7 s with them, 1.9-2.2 s with one; idle, 1.0-1.2 s
        either way: results/benchmarks/host_costs.json)."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._run()

    def _run(self) -> SweepResult:
        start = self.started = time.perf_counter()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.deadline = start + self.spec.search.seconds
        check_before_sweep(self.db_path, self.backend.replayed)
        for named in self.spec.problems:  # a problem a recording never saw: refused before any work
            self.backend.answerable(self.family, named.problem)
        history = self.log.read()
        check_log_family(self.log_path or self.out_dir, history, self.family.name)
        outcomes = []
        for index, named in enumerate(self.spec.problems, start=1):
            self._index = index
            outcomes.append(self._problem(named, history))
        result = SweepResult(
            self.spec.name,
            self.backend.replayed,
            tuple(outcomes),
            self.evaluated,
            time.perf_counter() - start,
            dict(self.breakdown),
            self.log_path,
            self.db_path,
            tuple(self.answers),
        )
        append_run(
            self.out_dir / "summary.json",
            {**result.summary(), "finished": datetime.now(UTC).isoformat(timespec="seconds")},
        )
        return result

    def _report(self, name: str, done: int, best: float | None, record: EvalRecord | None) -> None:
        """Tell the progress callback where the sweep stands (``self._budgets[-1]``: this problem's)."""
        if self.progress is None:
            return
        budget = self._budgets[-1]
        search = self.spec.search
        known = self._budgets
        to_come = len(self.spec.problems) - len(known)
        each = sum(known) / len(known) if search.strategy == "exhaustive" else search.trials
        now = time.perf_counter()
        self.progress(
            SweepProgress(
                problem=name,
                index=self._index,
                problems=len(self.spec.problems),
                done=min(done, budget),
                budget=budget,
                sweep_done=sum(known[:-1]) + min(done, budget),
                sweep_budget=sum(known) + round(each * to_come),
                sweep_estimated=to_come > 0,
                run_done=self._paced_by(name, done),
                elapsed_s=now - self.started,
                best_ms=best,
                deadline_s=max(0.0, self.deadline - now),
                record=record,
            )
        )

    def _paced_by(self, problem: str, done: int) -> int:
        """The variants the progress line's rate (and so its time left) counts: this invocation's
        (``done``: the problem's count, as reported)."""
        return self._run_done

    # -- one problem ------------------------------------------------------------------------------
    def _problem(self, named: NamedProblem, history: list[EvalRecord]) -> ProblemOutcome:
        problem, family = named.problem, self.family
        mine = [r for r in history if r.family == family.name and canonical_json(r.problem) == problem.key()]
        done = {
            canonical_json(r.config): r
            for r in mine  # a config the space no longer holds is history only
            if r.phase == "screen" and not r.baseline and self.spec.space.holds(r.config)
        }
        seed = input_seed(self.spec.search.seed, problem)
        self.backend.prepare(family, problem, seed)  # the worker builds inputs while the search starts up
        default = family.default_config(problem)
        winners = stored_tuned(self.db_path, family)
        tuned = winners.current
        # measured again early, so that a re-run keeps sight of them: the problem's stored winner, and its
        # winner under the family's older sources (a re-recording after a change of its kernels)
        stored = stored_winner(family, problem, tuned) or {}
        previous = stored_winner(family, problem, winners.older) or {}
        keep = [default.as_dict(), previous, *(t.config for t in tuned), *(r.config for r in done.values())]
        valid = self._valid(named, seed, keep)
        strategy = TimedStrategy(self._strategy(named, valid, done, tuned), self.breakdown)
        held, space = set(valid), self.spec.space
        for values in (default.as_dict(), stored, previous):
            if space.holds(values) and (config := space.validate(values)) in held:
                strategy.seed(config)
        evaluated = len(done)
        exhaustive = self.spec.search.strategy == "exhaustive"
        budget = len(valid) if exhaustive else min(self.spec.search.trials, len(valid))
        if budget < self.spec.search.trials and not exhaustive:
            log.warning(
                "%s: %s %d configurations, fewer than the %d trials asked: every one is evaluated",
                named.name,
                "its recording holds" if self.backend.replayed else "the space holds",
                budget,
                self.spec.search.trials,
            )
        self._budgets.append(budget)
        timed = [r.timing.median_ms for r in done.values() if r.status is Status.OK and r.timing]
        best = min(timed, default=None)
        self._report(named.name, evaluated, best, None)
        compiling: CompileQueue[tuple[Ask, Config]] = CompileQueue()
        queued: deque[Queued] = deque()  # compiled, in evaluation order; some waiting on the device
        inflight: set[str] = set()
        binaries: dict[Identity, EvalRecord] = {}
        failures: deque[Status] = deque(maxlen=self.settings.breaker)
        spare = 0 if self.backend.replayed else self.settings.spare_asks
        while True:
            accepting = time.perf_counter() < self.deadline
            depth, refill_at = self.settings.ahead(evaluated)
            refill = len(compiling) + len(queued) <= refill_at  # in flight: compiling or on the device
            while (
                accepting
                and refill
                and evaluated + len(compiling) + len(queued) < budget + spare
                and len(compiling) + len(queued) < depth
            ):
                ask = strategy.ask()
                if ask is None:
                    break
                config = self.spec.space.validate(ask.values)
                key = canonical_json(config.as_dict())
                if key in done:  # resumed: answer from the log, never run again
                    strategy.tell(ask, done[key])
                    continue
                if key in inflight:  # asked again while in flight: answered from its twin's record
                    compiling.add((ask, config), None)
                    continue
                inflight.add(key)
                compiling.add((ask, config), self._build(problem, config))
            while (
                accepting
                and compiling
                and evaluated + len(queued) < budget  # never past the budget: spare asks wait, then are cancelled
                and sum(q.kind is Kind.DEVICE for q in queued) < self.settings.device_queue
            ):
                entry = compiling.take_done()
                if entry is None and len(queued) < self.settings.built_below:  # the device runs dry: a built one
                    entry = self._ask_built(strategy, problem, compiling, inflight)
                if entry is None:
                    entry = self._compiled(compiling, wait=not queued)  # with work queued: its answers first
                if entry is None:
                    break
                ask, config = entry.item
                cutoff = self._cutoff(best)
                queued.append(self._dispatch(problem, ask, config, entry.future, seed, binaries, queued, cutoff))
            if not queued:
                break
            item = queued.popleft()
            key = canonical_json(item.config.as_dict())
            record = self._complete(problem, item, seed, binaries, done.get(key))
            if item.kind is Kind.SAME_CONFIG:
                strategy.tell(item.ask, record)
                continue
            inflight.discard(key)
            self.log.append(record)
            done[key] = record
            strategy.tell(item.ask, record)
            evaluated += 1
            self._run_done += 1
            if record.status is Status.OK and record.timing:
                ms = record.timing.median_ms
                best = ms if best is None else min(best, ms)
            self._notify(named.name, record)
            self._report(named.name, evaluated, best, record)
            self._check_breaker(failures, record)
        for entry in compiling.drain():  # the deadline reached with compiles in flight, or spare asks left
            if entry.future is not None:
                entry.future.cancel()
            strategy.tell(entry.item[0], EvalRecord(family.name, {}, {}, Status.TIMEOUT))
        self._budgets[-1] = min(evaluated, budget)  # finished: what it evaluated counts
        return self._finish(named, list(done.values()), mine, seed)

    def _valid(self, named: NamedProblem, seed: int, keep: list[Mapping[str, Any]]) -> list[Config]:
        """The problem's candidates: configurations of the sweep's space that break no validity rule
        for it (``candidates``: all of them, or a seeded sample of a space too large to enumerate,
        with ``keep``'s; exhaustive search enumerates any space); on replay, the recorded ones."""
        problem, space = named.problem, self.spec.space
        valid = valid_for(self.family, problem)
        answerable = self.backend.answerable(self.family, problem)
        if answerable is not None:
            return list(among(space, (json.loads(key) for key in answerable), valid))
        if self.spec.search.strategy == "exhaustive":
            return [c for c in space if valid(c)]
        chosen = candidates(space, valid, seed, self.settings.enumerated, keep)
        if chosen.sampled:
            log.info(
                "%s: %d of the space's %d configurations drawn, %d valid",
                named.name,
                chosen.checked,
                space.size(),
                len(chosen.configs),
            )
        return list(chosen.configs)

    def _strategy(
        self, named: NamedProblem, valid: list[Config], done: dict[str, EvalRecord], tuned: list[Tuned]
    ) -> Strategy:
        search = self.spec.search
        if search.strategy == "exhaustive":
            return ExhaustiveStrategy(valid)
        if search.strategy == "random":
            return RandomStrategy(valid, search.seed)
        if search.strategy == "tpe":
            return TpeStrategy(self.spec.space, valid, search.seed, done.values())
        seeds = warm_seeds(self.family, named.problem, tuned, valid)
        built = self._built(named.problem, valid)
        return SurrogateStrategy(self.spec.space, valid, search.seed, done.values(), seeds=seeds, built=built)

    def _label(self, problem: Problem, config: Config | None = None) -> str:
        """The compile cache's label of a variant (``NvrtcBuilder.labelled``): family, its sources'
        hash, problem and configuration, tab-separated; without ``config``, the problem's prefix."""
        head = f"{self._labels_head}{problem.key()}\t"
        return head if config is None else head + canonical_json(config.as_dict())

    def _built(self, problem: Problem, valid: list[Config]) -> list[Config]:
        """The candidates whose CUBIN the compile cache holds, found by the labels of its compiles
        (rendering only those: a large candidate set is not rendered whole); none on replay, which
        compiles nothing."""
        if self.backend.replayed:
            return []
        labelled = self.builder.labelled(self._label(problem))
        held = [c for c in valid if labelled and canonical_json(c.as_dict()) in labelled]
        return [c for c in held if self.builder.cached(self.family.render(problem, c))]

    def _build(self, problem: Problem, config: Config) -> Future[BuildResult | None]:
        """The variant's compile, started in the pool; on replay none (the recording answers, compile
        errors included), so replaying compiles nothing."""
        if self.backend.replayed:
            done: Future[BuildResult | None] = Future()
            done.set_result(None)
            return done
        source = self.family.render(problem, config)
        with without_ctrl_c():
            submitted = self.builder.submit(source, self._label(problem, config))
        # a Future[BuildResult] never yields anything but a BuildResult (``Future`` is invariant)
        return cast("Future[BuildResult | None]", submitted)

    def _ask_built(
        self,
        strategy: Strategy,
        problem: Problem,
        compiling: CompileQueue[tuple[Ask, Config]],
        inflight: set[str],
    ) -> Compiling[tuple[Ask, Config]] | None:
        """The strategy's pick among the configurations built before the search began
        (``Strategy.ask_built``), its CUBIN read from the cache here, in the loop's thread; None when
        it has none left, or when the cache lost that one (then it joins ``compiling`` as asks do)."""
        ask = strategy.ask_built()
        if ask is None:
            return None
        config = self.spec.space.validate(ask.values)
        inflight.add(canonical_json(config.as_dict()))
        loaded = self.builder.load(self.family.render(problem, config))
        if loaded is None:
            compiling.add((ask, config), self._build(problem, config))
            return None
        build: Future[BuildResult | None] = Future()
        build.set_result(loaded)
        return Compiling((ask, config), build)

    def _compiled(self, compiling: CompileQueue[T], wait: bool) -> Compiling[T] | None:
        """The next variant whose compile is done (``CompileQueue.take_done``); when none is, with
        ``wait`` the first to finish (compile_wait), else None."""
        entry = compiling.take_done()
        if entry is None and wait:
            with self._stage("compile_wait"):
                compiling.wait_any()
            entry = compiling.take_done()
        return entry

    def _cutoff(self, best_ms: float | None) -> float | None:
        """The screening cut-off (ms) given the problem's best median so far: none before the first
        timing or with ``cutoff = 0``."""
        factor = self.spec.search.cutoff
        return best_ms * factor if best_ms is not None and factor else None

    def _dispatch(
        self,
        problem: Problem,
        ask: Ask,
        config: Config,
        future: Future[BuildResult | None] | None,
        seed: int,
        binaries: dict[Identity, EvalRecord],
        queued: deque[Queued],
        cutoff_ms: float | None,
    ) -> Queued:
        """Wait for a variant's compile and queue it: on the device (timed in full unless its probe is
        slower than ``cutoff_ms``), or answered without it."""
        if future is None:
            return Queued(Kind.SAME_CONFIG, ask, config)
        with self._stage("compile_wait"):
            build = future.result()  # a compile past its timeout comes back as a TIMEOUT result
        if build is None:  # replayed: the recording answers for the configuration
            self.backend.submit(Evaluation(self.family, problem, config, None, seed))
            return Queued(Kind.DEVICE, ask, config, identity=(canonical_json(config.as_dict()),))
        if not build.cache_hit:
            self.breakdown["compile"] += build.seconds
        if build.status is not Status.OK:
            return Queued(
                Kind.KNOWN,
                ask,
                config,
                record=self._record(problem, config, Outcome(build.status, build.log[-2000:]), seed),
            )
        identity = (build.binary_hash, variant_of(self.family, problem, config, build).launch_identity)
        if identity in binaries:
            return Queued(Kind.KNOWN, ask, config, record=twin(binaries[identity], config))
        if any(q.kind is Kind.DEVICE and q.identity == identity for q in queued):
            return Queued(Kind.SAME_BINARY, ask, config, identity=identity)
        self.backend.submit(Evaluation(self.family, problem, config, build, seed, cutoff_ms))
        return Queued(Kind.DEVICE, ask, config, identity=identity)

    def _complete(
        self,
        problem: Problem,
        item: Queued,
        seed: int,
        binaries: dict[Identity, EvalRecord],
        same_config: EvalRecord | None,
    ) -> EvalRecord:
        """The record of a queued variant."""
        if item.kind is Kind.SAME_CONFIG:
            assert same_config is not None  # its twin was dispatched first, so it is answered by now
            return same_config
        if item.kind is Kind.KNOWN:
            assert item.record is not None
            return item.record
        assert item.identity is not None  # DEVICE and SAME_BINARY items carry their identity
        if item.kind is Kind.SAME_BINARY:  # its twin was queued first, so it is answered by now
            return twin(binaries[item.identity], item.config)
        with self._stage("device_wait"):
            outcome = harness_checked(self.backend.next_outcome())
        if not self.backend.replayed:  # a replayed record's stage times are the recording's
            for stage, seconds in outcome.stage_seconds.items():
                self.breakdown[stage] = self.breakdown.get(stage, 0.0) + seconds
            busy = outcome.stage_seconds.get("verify", 0.0) + outcome.stage_seconds.get("time", 0.0)
            self.answers.append((time.perf_counter() - self.started, busy))
        self.evaluated += 1
        record = self._record(problem, item.config, outcome, seed)
        binaries[item.identity] = record
        return record

    def _record(
        self, problem: Problem, config: Config | None, outcome: Outcome, seed: int, phase: str = "screen"
    ) -> EvalRecord:
        work = self.family.work(problem)
        return EvalRecord(
            family=self.family.name,
            problem=problem.to_dict(),
            config=config.as_dict() if config else {},
            status=outcome.status,
            message=outcome.message,
            timing=Timing(outcome.samples_ms, outcome.clocks) if outcome.samples_ms else None,
            metrics=outcome.metrics,
            bytes_moved=work.bytes_moved,
            flops=work.flops,
            device=self.backend.device,
            replayed=self.backend.replayed,
            input_seed=seed,
            baseline=outcome.baseline,
            phase=phase,
            stage_seconds=dict(outcome.stage_seconds),
        )

    def _notify(self, name: str, record: EvalRecord) -> None:
        for listener in self.listeners:
            listener(name, record)

    def _check_breaker(self, failures: deque[Status], record: EvalRecord) -> None:
        failures.append(record.status)
        if (
            len(failures) == failures.maxlen
            and len(set(failures)) == 1
            and failures[0] in FAILURES - {Status.WRONG_RESULT, Status.COMPILE_ERROR}
        ):
            raise SweepAborted(
                f"stopping: the last {failures.maxlen} variants all ended in {failures[0].value} "
                f"(last: {record.message[:300]}). This looks systematic (driver, device or family "
                "source), not a bad variant; fix it and run the same command again to resume."
            )

    # -- finalists and the winner -----------------------------------------------------------------
    def _finish(
        self, named: NamedProblem, records: list[EvalRecord], history: list[EvalRecord], seed: int
    ) -> ProblemOutcome:
        problem = named.problem
        ok = sorted(
            (r for r in records if r.status is Status.OK and r.timing), key=lambda r: cast(Timing, r.timing).median_ms
        )
        finalists = ok[: self.spec.search.finalists]
        started = time.perf_counter()
        final = self._final_stage().retime(problem, finalists, history, seed) if finalists else []
        self.breakdown["final"] += time.perf_counter() - started
        started = time.perf_counter()
        winner, checks = self._final_stage().winner(problem, final, history, seed)
        self.breakdown["sanitize"] += time.perf_counter() - started
        baselines = [r for r in final if r.baseline]
        # the fastest torch form (as the benchmark files compare), else the first one, which says why not
        baseline = fastest(baselines) or next(iter(baselines), None)
        stored = False
        if winner is not None:
            key = WinnerKey.of(winner, self.family.source_hash(), problem.key(), problem.dtype)
            with self._winners() as db:
                stored = db.put(key, winner, library=baseline)
        default_key = canonical_json(self.family.default_config(problem).as_dict())
        # timed as the winner was: the default's re-timing where it was a finalist, else its screening
        default = next(
            (
                r
                for r in [*final, *records]
                if not r.baseline and r.status is Status.OK and r.timing and canonical_json(r.config) == default_key
            ),
            None,
        )
        counts: dict[str, int] = {}
        for r in records:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        return ProblemOutcome(named.name, problem, winner, baseline, default, stored, counts, checks)

    @contextmanager
    def _stage(self, stage: str) -> Iterator[None]:
        """Adds the wall time of the block to ``breakdown[stage]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.breakdown[stage] += time.perf_counter() - start

    def _final_stage(self) -> FinalStage:
        return FinalStage(
            self.family, self.spec.space, self.backend, self.log, self.sanitizer, self._record, self._compile
        )

    def _compile(self, problem: Problem, configs: list[Config]) -> list[BuildResult]:
        """The variants of ``configs`` compiled in the pool (the on-disk cache answers those compiled
        before), waited for where Ctrl-C reaches."""
        sources = [self.family.render(problem, c) for c in configs]
        with without_ctrl_c():
            futures = [self.builder.submit(source) for source in sources]
        return [future.result() for future in futures]

    def _winners(self) -> WinnerStore:
        """The winners store (opened by the caller's ``with``)."""
        return WinnersDB(self.db_path)
