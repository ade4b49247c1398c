"""A sweep shared by any number of worker processes, on one host or many, through PostgreSQL.

Each worker runs ``DistributedSweep`` against the same database. What they share:

* One Optuna study per problem in Optuna's RDB storage, one trial per evaluation (its configuration
  in the user attribute ``tunebox_config``; its value the median, pruned when the variant failed).
  Trials are kept alive by heartbeats (a thread of each worker records them for its running trials).
  Workers fail the trials whose heartbeat went stale (``fail_stale_trials``, at most once a second),
  and Optuna's ``RetryHeartbeatStaleTrialCallback`` queues each again (WAITING, the same
  configuration); a worker takes a queued trial (WAITING -> RUNNING, atomic in the storage) before
  proposing a new one.
* The evaluation records and the configurations' claims (``tunebox.store.postgres.PgRecords``): a
  trial evaluates a configuration only after claiming it. A configuration already evaluated, or being
  evaluated by a live trial, fails the trial (not evaluated) and the worker proposes another; the
  claim of a trial that ended without a record is taken over. Records are unique per (problem,
  configuration, phase), stored before their trial is told, so nothing is evaluated or stored twice
  and nothing stored is lost; a problem's claims never pass its budget.
* The winners (``PgWinnersDB``, the SQLite database's compare-and-set).

Proposals: ``exhaustive`` and ``random`` take the next unclaimed configuration in their order (among
the first few, so that workers proposing together seldom collide); ``tpe`` and ``surrogate`` ask a
model of the worker's own (``shared_models.py``: in memory, fed every worker's stored records of the
problem, as the single-process sweep feeds its log), drawing an unclaimed configuration at random
after ``patience`` proposals in a row that were claimed already. As in the single-process loop,
configurations are claimed and compiled ahead and the next evaluation is queued on the device while
one runs.

A worker screens every problem first, claiming while the problem's budget has unclaimed room; then,
problem by problem, it helps finish the screening (retried trials of dead workers), waits for the
others' evaluations to be stored, and re-times the finalists with the baselines under the problem's
finishing lock (one worker at a time; the phase is stored in one transaction, and a later worker
takes it from the database), storing the winner.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import socket
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState, create_trial

from ..build.nvrtc import NvrtcBuilder
from ..errors import DatabaseError
from ..params import Config, Value
from ..records import EvalRecord, Status, canonical_json
from ..runner.backends import Backend
from ..runner.sanitizer import Sanitizer
from ..store.postgres import ClaimResult, PgRecords, PgWinnersDB, connect, redacted, sqlalchemy_url, storage_error
from ..store.winner_rows import WinnerStore, refuse_other_kind
from ..sweep_spec import NamedProblem, SweepSpec
from .compiling import CompileQueue
from .loop import Listener, Sweep, input_seed
from .loop_settings import LoopSettings
from .queued import Identity, Kind, Queued
from .runs import ProblemOutcome, SweepProgress, SweepResult
from .shared_models import SharedModel, shared_model
from .strategy import Ask

log = logging.getLogger(__name__)

CONFIG_ATTR = "tunebox_config"  # a trial's configuration (canonical JSON) in the shared study
_STORAGE_LOCK = 0x7475_6E65_626F_7832  # serialises the creation of Optuna's tables across workers


@dataclass(frozen=True)
class Heartbeat:
    """Optuna's heartbeat settings: a running trial's heartbeat is recorded every ``interval_s``; a
    trial without one for ``grace_s`` is stale (its worker died) and is queued again."""

    interval_s: int = 10
    grace_s: int = 30


@dataclass
class _Problem:
    """A problem under way in this worker."""

    named: NamedProblem
    seed: int
    valid: list[Config]
    budget: int
    order: list[Config]  # the order configurations are proposed in without a model (or past its patience)
    study: optuna.Study  # shared, in the database
    model: SharedModel | None  # tpe / surrogate: this worker's, fed every stored record of the problem
    given: set[str] = field(default_factory=set)  # configurations known to be claimed (canonical JSON)
    seen: int = 0  # the last record id fed to the model
    seen_claim: int = 0  # the last claim number added to ``given``
    binaries: dict[Identity, EvalRecord] = field(default_factory=dict)
    failures: deque[Status] = field(default_factory=deque)
    repeats: int = 0  # proposals in a row that another trial had claimed
    best: float | None = None
    records: int = 0  # screening records stored (as last counted, plus this worker's since)
    stale_checked: float = float("-inf")

    @property
    def key(self) -> str:
        return self.named.problem.key()


def open_storage(url: str, heartbeat: Heartbeat) -> RDBStorage:
    """Optuna's RDB storage on ``url`` with heartbeats and the retry of stale trials."""
    conn = connect(url)  # tunebox's tables, and the lock below
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (_STORAGE_LOCK,))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(
                sqlalchemy_url(url),
                engine_kwargs={"pool_pre_ping": True},
                heartbeat_interval=heartbeat.interval_s,
                grace_period=heartbeat.grace_s,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(),
            )
    finally:
        conn.close()


def space_digest(spec: SweepSpec) -> str:
    """What a shared sweep's workers must agree on beside its name: the family and the conditional space."""
    space = {name: {p.name: list(p.choices) for p in t.params} for name, t in spec.space.templates}
    return hashlib.sha256(canonical_json({"family": spec.family.name, "space": space}).encode()).hexdigest()[:16]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class DistributedSweep(Sweep):
    """One worker of a sweep shared through the PostgreSQL database at ``url`` (see the module doc)."""

    def __init__(
        self,
        spec: SweepSpec,
        backend: Backend,
        builder: NvrtcBuilder,
        url: str,
        listeners: tuple[Listener, ...] = (),
        settings: LoopSettings | None = None,
        *,
        progress: Callable[[SweepProgress], None] | None = None,
        heartbeat: Heartbeat | None = None,
        poll_s: float = 0.1,
        worker: str | None = None,
        patience: int = 3,
        sanitizer: Sanitizer | None = None,
    ) -> None:
        super().__init__(
            spec, backend, builder, Path("."), Path("."), listeners, settings, progress=progress, sanitizer=sanitizer
        )
        self.url = url
        self.heartbeat = heartbeat or Heartbeat()
        self.poll_s = poll_s
        self.patience = patience
        self.worker = worker or worker_name()
        self.sweep_key = spec.name + ("-replay" if backend.replayed else "")
        self.log_path = None
        self._running: set[int] = set()
        self._running_lock = threading.Lock()
        self._random = random.Random(f"{spec.search.seed}:{self.worker}")
        self._first_done: dict[str, int] = {}  # each problem's count when this worker first reported it
        self._since: dict[str, int] = {}  # each problem's variants stored (by any worker) since then

    # -- the run ----------------------------------------------------------------------------------
    def _check_shared(self) -> None:
        """Before any work, ``DatabaseError`` where this worker would join what it must not: a sweep of
        this name started from another space (another sweep file), records measured on another device or
        toolchain, or winners of the other kind (replayed where this worker measures, or the reverse)."""
        where, name = redacted(self.url), self.sweep_key
        others = sorted(d.describe() for d in self.pg.devices() - {self.backend.device})
        if others:
            raise DatabaseError(
                f"{where}: sweep {name!r} there was measured on {', '.join(others)}, this "
                f"worker's is {self.backend.device.describe()}: a shared sweep is measured on one device and "
                "toolchain; give this worker's sweep another name or another database (--storage); nothing was changed"
            )
        with PgWinnersDB(self.url) as winners:
            refuse_other_kind(winners, f"{where} (tunebox_winners)", self.backend.replayed, "--storage")
        digest = space_digest(self.spec)  # bound last: a refused worker leaves a new sweep unbound
        if self.pg.bind_space(digest) != digest:
            raise DatabaseError(
                f"{where}: its sweep {name!r} was started from another sweep file (another family or space): "
                "give this one another name (name = ... in the file) or another database (--storage); "
                "nothing was changed"
            )

    def _run(self) -> SweepResult:
        start = self.started = time.perf_counter()
        self.deadline = start + self.spec.search.seconds
        self.storage = open_storage(self.url, self.heartbeat)
        self.pg = PgRecords(self.url, self.sweep_key, self.worker)
        self.log = self.pg
        try:
            self._check_shared()
            with self._heartbeats():
                states = []
                for index, named in enumerate(self.spec.problems, start=1):
                    self._index = index
                    state = self._start(named)
                    self._budgets.append(state.budget)
                    self._report(named.name, self.pg.counts(self.family.name, state.key)[1], None, None)
                    self._screen(state, wait=False)
                    states.append(state)
                outcomes = [self._finish_problem(state) for state in states]
        finally:
            self.pg.close()
            self.storage.remove_session()
            self.storage.engine.dispose()
        return SweepResult(
            self.spec.name,
            self.backend.replayed,
            tuple(outcomes),
            self.evaluated,
            time.perf_counter() - start,
            dict(self.breakdown),
            None,
            None,
            tuple(self.answers),
            storage=redacted(self.url),
        )

    def _winners(self) -> WinnerStore:
        return PgWinnersDB(self.url)

    def _paced_by(self, problem: str, done: int) -> int:
        """Every worker's variants since this one started, problem by problem (each counted from its first
        report here): with N workers, this one's alone made the time left N times too long."""
        first = self._first_done.setdefault(problem, done)
        self._since[problem] = done - first
        return max(self._run_done, sum(self._since.values()))

    @contextmanager
    def _heartbeats(self) -> Iterator[None]:
        """A thread recording the heartbeat of this worker's running trials every interval."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat.interval_s):
                with self._running_lock:
                    running = list(self._running)
                for trial_id in running:
                    try:
                        self.storage.record_heartbeat(trial_id)
                    except Exception as exc:  # a lost connection: the next beat tries again
                        told = storage_error(self.url, exc)  # SQLAlchemy's own text blames the data
                        log.warning("heartbeat of trial %d failed: %s", trial_id, told or exc)

        thread = threading.Thread(target=beat, name="tunebox-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _begin(self, trial_id: int) -> None:
        self.storage.record_heartbeat(trial_id)  # before its claim: a claimed trial can go stale
        with self._running_lock:
            self._running.add(trial_id)

    def _end(self, trial_id: int) -> None:
        with self._running_lock:
            self._running.discard(trial_id)

    def _alive(self, trial_id: int) -> bool:
        """Whether a claim's trial may still store its record: running (its heartbeat not stale)."""
        return self.storage.get_trial(trial_id).state is TrialState.RUNNING

    # -- a problem --------------------------------------------------------------------------------
    def _start(self, named: NamedProblem) -> _Problem:
        problem, family, search = named.problem, self.family, self.spec.search
        seed = input_seed(search.seed, problem)
        self.backend.prepare(family, problem, seed)
        default = family.default_config(problem)
        valid = self._valid(named, seed, [default.as_dict()])  # every worker draws the same candidates
        budget = len(valid) if search.strategy == "exhaustive" else min(search.trials, len(valid))
        order = list(valid)
        if search.strategy in ("random", "surrogate"):  # surrogate: its order past the model's patience
            random.Random(search.seed).shuffle(order)
        first = default if default in set(valid) else None
        if first is not None:
            order = [first, *(c for c in order if c != first)]
        digest = hashlib.sha256(f"{self.sweep_key}\0{family.name}\0{problem.key()}".encode()).hexdigest()[:20]
        study = self._study(f"tunebox:{self.sweep_key}:{family.name}:{digest}")
        model = shared_model(search.strategy, self.spec.space, valid, self._random.randrange(2**31), first)
        state = _Problem(named, seed, valid, budget, order, study, model)
        state.failures = deque(maxlen=self.settings.breaker)
        return state

    def _study(self, name: str) -> optuna.Study:
        for _ in range(5):  # workers creating the study together: one creates it, the others load it
            try:
                return optuna.create_study(
                    storage=self.storage, study_name=name, direction="minimize", load_if_exists=True
                )
            except optuna.exceptions.DuplicatedStudyError:
                time.sleep(0.05)
        raise DatabaseError(f"{redacted(self.url)}: cannot create or load the study {name}")

    def _learn(self, state: _Problem) -> None:
        """Feed the records stored since the last call (every worker's) to the model; note the
        configurations claimed since (not to be proposed)."""
        for number, config in self.pg.claimed_since(self.family.name, state.key, state.seen_claim):
            state.seen_claim = number
            state.given.add(config)
        for record_id, record in self.pg.read_since(self.family.name, state.key, state.seen):
            state.seen = record_id
            if record.phase != "screen" or record.baseline:
                continue
            state.given.add(canonical_json(record.config))
            if state.model is not None:
                state.model.learn(record)

    def _propose(self, state: _Problem) -> Config | None:
        """The next configuration to claim: exhaustive / random, the first unclaimed in order (among
        the first few, so that workers proposing together seldom collide); tpe / surrogate, the
        model's proposal, or after ``patience`` proposals in a row claimed by others an unclaimed one
        at random."""
        if state.model is not None and state.repeats < self.patience:
            for _ in range(self.patience):
                values = state.model.propose()
                if values is None:
                    break
                if canonical_json(values) not in state.given:
                    return self.spec.space.validate(values)
                state.repeats += 1
        free = [c for c in state.order if canonical_json(c.as_dict()) not in state.given]
        if not free:
            return None
        if state.model is not None:
            return self._random.choice(free)
        return free[0] if free[0] == state.order[0] else self._random.choice(free[:8])

    def _pop_waiting(self, state: _Problem) -> FrozenTrial | None:
        """A trial queued again (a dead worker's), now running here; None when there is none."""
        for trial in self.storage.get_all_trials(state.study._study_id, deepcopy=False, states=(TrialState.WAITING,)):
            try:
                if self.storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING):
                    return trial
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # another worker took it
        return None

    def _screen(self, state: _Problem, wait: bool) -> None:
        """Claim and evaluate the problem's configurations while its budget has unclaimed room (and,
        ``wait``: until every claimed one has its record, evaluating dead workers' retried trials).
        As the single-process loop does, configurations are claimed and compiled ahead (up to
        ``pipeline_depth``; on replay, which compiles nothing, ``device_queue``) and up to
        ``device_queue`` evaluations are queued on the device, so the database round trips and the
        compiles overlap the device's work."""
        problem, seed = state.named.problem, state.seed
        ahead = self.settings.device_queue if self.backend.replayed else self.settings.pipeline_depth
        compiling: CompileQueue[tuple[int, dict[str, Value], Config]] = CompileQueue()
        inflight: deque[tuple[int, Queued]] = deque()
        try:
            while True:
                accepting = time.perf_counter() < self.deadline
                progress = "none"
                while accepting and len(compiling) + len(inflight) < max(ahead, 1):
                    progress, claimed = self._claim_next(state)
                    if claimed is None:
                        break
                    trial_id, values, config = claimed
                    compiling.add((trial_id, values, config), self._build(problem, config))
                while compiling and sum(q.kind is Kind.DEVICE for _, q in inflight) < self.settings.device_queue:
                    entry = self._compiled(compiling, wait=not inflight)  # with work queued: its answers first
                    if entry is None:
                        break
                    trial_id, values, config = entry.item
                    queued = deque(q for _, q in inflight)
                    ask, cutoff = Ask(None, values), self._cutoff(state.best)
                    item = self._dispatch(problem, ask, config, entry.future, seed, state.binaries, queued, cutoff)
                    inflight.append((trial_id, item))
                if inflight:
                    trial_id, item = inflight.popleft()
                    try:
                        record = self._complete(problem, item, seed, state.binaries, None)
                        self._store(state, trial_id, record)
                    finally:
                        self._end(trial_id)
                    continue
                if not accepting or progress == "complete" or not wait:
                    return
                time.sleep(self.poll_s)  # the others are evaluating the rest
        finally:  # past the deadline, or stopped by an error: left to go stale and be retried
            for entry in compiling.drain():
                if entry.future is not None:
                    entry.future.cancel()
                self._end(entry.item[0])
            for trial_id, _ in inflight:
                self._end(trial_id)

    def _claim_next(self, state: _Problem) -> tuple[str, tuple[int, dict[str, Value], Config] | None]:
        """Claim the problem's next configuration for a new trial (or a dead worker's retried one):
        ("claimed", (trial id, values, configuration)); ("complete", None) when every evaluation of
        the budget is stored; ("none", None) when nothing is left to claim now."""
        family, key = self.family.name, state.key
        now = time.perf_counter()
        if now - state.stale_checked >= min(1.0, self.heartbeat.interval_s):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                fail_stale_trials(state.study)  # a dead worker's trials: failed and queued again
            state.stale_checked = now
        claims, records, queued = self.pg.counts(family, key, state.study._study_id)
        state.records = records
        if records >= state.budget:
            return "complete", None
        self._learn(state)
        while True:
            waiting = self._pop_waiting(state) if queued else None
            if waiting is not None:
                trial_id = waiting._trial_id
                values: dict[str, Value] = json.loads(waiting.user_attrs[CONFIG_ATTR])
            else:
                queued = 0
                config = self._propose(state) if claims < state.budget else None
                if config is None:
                    return "none", None
                values = config.as_dict()
                # the configuration as a user attribute: one row (a parameter per decision costs a
                # round trip each); the retry of a stale trial copies it
                template = create_trial(state=TrialState.RUNNING, user_attrs={CONFIG_ATTR: canonical_json(values)})
                trial_id = self.storage.create_new_trial(state.study._study_id, template_trial=template)
            self._begin(trial_id)
            config = self.spec.space.validate(values)
            ckey = canonical_json(config.as_dict())
            claim = self.pg.claim(family, key, ckey, trial_id, state.budget, self._alive)
            if claim.result is ClaimResult.MINE:
                state.given.add(ckey)
                state.repeats = 0
                if claim.taken_over:
                    log.info("%s: taking over %s from a dead worker's trial", key, config.label())
                return "claimed", (trial_id, values, config)
            self.storage.set_trial_state_values(trial_id, state=TrialState.FAIL)  # not evaluated here
            self._end(trial_id)
            if claim.result is ClaimResult.FULL:
                return "none", None
            state.given.add(ckey)
            state.repeats += 1

    def _store(self, state: _Problem, trial_id: int, record: EvalRecord) -> None:
        """Store an evaluation's record, then tell its trial (a told trial's record is never lost)."""
        self.pg.add(record)
        if record.status is Status.OK and record.timing is not None:
            self.storage.set_trial_state_values(trial_id, state=TrialState.COMPLETE, values=[record.timing.median_ms])
            ms = record.timing.median_ms
            state.best = ms if state.best is None else min(state.best, ms)
        else:
            self.storage.set_trial_state_values(trial_id, state=TrialState.PRUNED)
        state.records += 1
        self._run_done += 1
        self._notify(state.named.name, record)
        self._report(state.named.name, state.records, state.best, record)
        self._check_breaker(state.failures, record)

    def _finish_problem(self, state: _Problem) -> ProblemOutcome:
        """Wait for the problem's screening (helping with retried trials), then re-time its finalists
        and store the winner, one worker at a time (a later one takes the re-timing from the database)."""
        self._screen(state, wait=True)
        family, key = self.family.name, state.key
        with self.pg.finishing(family, key):
            history = self.pg.read(family, key)
            done = {
                canonical_json(r.config): r
                for r in history
                if r.phase == "screen" and not r.baseline and self.spec.space.holds(r.config)
            }
            return self._finish(state.named, list(done.values()), history, state.seed)
