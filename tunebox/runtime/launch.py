"""Launch the tuned variant of a family, or the library call it beats, on the caller's own GPU arrays.

Arrays are torch tensors, CuPy arrays or DLPack producers (``arrays.py``). What runs is decided once per
problem (``serving.py``): the tuned kernel where it is known to beat the library call at that problem,
else the library call (torch tensors) or the kernel; an untuned problem may first race kernels and the
library call on the caller's inputs (``tune``: see ``first_use.py``). The launch runs on the caller's
stream (``stream``, else torch's current stream for tensors or a CUDA array's own, else the legacy
default stream) in the caller's CUDA context. Kernels are compiled once (or loaded from the CUBIN
cache) and kept per process.

A repeated call on torch tensors of the same shapes, types, device, options and stream takes the fast
path (``fast_path.py``): no parsing, lookup or validation beyond shapes, types, contiguity and
pointers; a single-kernel plan writes the new addresses into its prebuilt argument struct and calls
``cuLaunchKernelEx``. It works
inside ``torch.cuda.graph`` capture once the plan exists (call it once before capturing). ``bind``
goes further for a loop on the same tensors: the bound launch skips the fast path's key too
(``bound.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..build.nvrtc import BuildResult, NvrtcBuilder, nvrtc_version
from ..cuda_api import load_kernel, pack, steps_launcher, zero_bytes
from ..errors import CompileError, DeviceUnavailable, InvalidProblem
from ..families import get as get_family
from ..families.base import Arg, BufferArg, BufferSpec, KernelSource, LaunchGeometry, Problem, TensorMapArg
from ..families.contract import Family
from ..params import Config
from ..records import DeviceInfo, Status
from ..runner.probe import unavailable_reason
from ..runner.protocol import variant_of
from ..sweep_spec import check_problem
from .arrays import DeviceArray, device_array, dlpack_only, misaligned, stores
from .bound import BoundLaunch, FastSource
from .fast_path import DirectLaunch, FastEntry, all_torch, library_runner, on_addresses, repointable, torch_signature
from .first_use import POLICIES, Policy, answer_of, candidates, keep, portfolio, raced_db
from .lookup import Lookup, LookupResult, default_db, shared
from .race import RaceResult, race
from .serving import Served, check_use, decide, library_call, library_form

log = logging.getLogger(__name__)
_Step = tuple[Any, LaunchGeometry, tuple[Arg, ...]]  # a loaded kernel, its geometry, its arguments (not packed)


@dataclass(frozen=True)
class _Plan:
    """What runs for one problem: the decision, and the kernel launches (prologue first) with the
    workspace they use, or the library call."""

    served: Served
    steps: tuple[_Step, ...]
    library: Callable[[Mapping[str, Any]], None] | None
    workspace: tuple[BufferSpec, ...] = ()


class Launcher:
    """Per-process cache of decisions, loaded kernels and bound launches; thread-safe. ``db``: the
    winners database (default ``default_db()``); ``cache_dir``: the CUBIN cache."""

    def __init__(
        self,
        db: str | Path | None = None,
        cache_dir: Path | None = None,
        *,
        tune: Policy = "off",
        raced: str | Path | None = None,
        race_samples: int = 5,
        race_budget_s: float = 0.5,
    ) -> None:
        if tune not in POLICIES:
            raise InvalidProblem(f"tune must be one of {POLICIES}, got {tune!r}")
        if not (isinstance(race_samples, int) and not isinstance(race_samples, bool) and race_samples >= 1):
            raise InvalidProblem(f"race_samples must be a whole number of 1 or more, got {race_samples!r}")
        if not (isinstance(race_budget_s, int | float) and race_budget_s > 0):
            raise InvalidProblem(f"race_budget_s must be a positive number of seconds, got {race_budget_s!r}")
        self.db_path = Path(default_db() if db is None else db)
        self._lookup = Lookup(self.db_path)
        self._cache_dir = cache_dir
        self.tune = tune
        self.raced_path = Path(raced_db() if raced is None else raced)
        self._race_samples, self._race_budget_s = race_samples, race_budget_s
        self.races: list[RaceResult] = []  # every race this launcher ran, in order (for reports)
        self._raced: dict[tuple[str, Problem], LookupResult] = {}  # this process's race answers
        # (family, problem, use, torch tensors, misaligned arrays) -> plan
        self._plans: dict[tuple[str, Problem, str, bool, tuple[str, ...]], _Plan] = {}
        self._builds: dict[KernelSource, BuildResult] = {}  # compiled once per source, whatever the problem
        self._bindings: dict[tuple[str, Problem, int], _Binding] = {}  # per (family, problem, stream)
        self._fast: dict[Hashable, FastEntry] = {}  # repeated torch calls (see the module doc)
        self._fast_version = 0  # how often ``_fast`` was emptied (plans replaced): bound launches follow
        self._lock = threading.Lock()
        self._device: Any = None
        self.info: DeviceInfo | None = None
        self._builder: NvrtcBuilder | None = None

    def _ensure_device(self) -> None:
        if self._device is not None:
            return
        from cuda.bindings import driver
        from cuda.core import Device

        try:
            dev = Device()
            dev.set_current()
        except Exception as exc:  # no driver (cuda-pathfinder), no device or a broken one (the driver)
            reason = unavailable_reason(f"{type(exc).__name__}: {exc}")
            raise DeviceUnavailable(f"tunebox.launch needs a CUDA GPU: {reason}") from exc
        cc = dev.compute_capability
        err, version = driver.cuDriverGetVersion()
        self._device = dev
        self.info = DeviceInfo(dev.name, f"{cc.major}.{cc.minor}", str(version), nvrtc_version())
        self._builder = NvrtcBuilder(f"sm_{cc.major}{cc.minor}", self._cache_dir, workers=1)

    def device_info(self) -> DeviceInfo:
        """The current device as the winners database keys it (starts CUDA on first use)."""
        self._ensure_device()
        assert self.info is not None
        return self.info

    def choose(self, family: Family[Any], problem: Problem) -> LookupResult:
        return self._lookup.lookup(family, problem, self.device_info())

    def __call__(
        self,
        family_name: str,
        arrays: dict[str, Any],
        stream: int | None = None,
        *,
        use: str = "auto",
        **options: Any,
    ) -> Served:
        """Run ``family_name`` on ``arrays`` (buffer name -> array) and say what ran. ``use``: "auto"
        (the kernel where it is known to beat the library call, see ``serving.py``), "tunebox" or
        "library". Workspace a variant needs is allocated here, once per problem and stream."""
        signature = torch_signature(family_name, arrays, stream, use, options)
        if signature is not None:
            entry = self._fast.get(signature[0])
            if entry is not None and entry.run(arrays, signature[1], signature[2]):
                return entry.served
        check_use(use)
        if not isinstance(arrays, Mapping):
            raise InvalidProblem(f"arrays is a dict of buffer name -> GPU array, not {type(arrays).__name__}")
        if stream is not None and not isinstance(stream, int):
            raise InvalidProblem(f"stream is a CUDA stream handle (an int) or None, not {type(stream).__name__}")
        family = get_family(family_name)
        options = check_problem(family_name, options)  # a non-finite pad_value, say, says what to give instead
        # arrays with a stream of their own first (torch, CUDA array interface): the kernel's stream is
        # ``stream`` or theirs; DLPack producers are then asked to make their data ready on it
        described = {name: device_array(a) for name, a in arrays.items() if not dlpack_only(a)}
        handle = int(stream if stream is not None else next((d.stream for d in described.values() if d.stream), 0) or 0)
        described = {name: described.get(name) or device_array(a, handle) for name, a in arrays.items()}
        problem = _problem_of(family, described, options)
        _check_buffers(family, problem, described)
        torch_arrays = all_torch(arrays)
        offset = misaligned(described)
        with self._lock:
            key = (family_name, problem, use, torch_arrays, offset)
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plan(family, problem, use, torch_arrays, arrays, handle, offset)
                self._plans[key] = plan
            if plan.library is not None:
                library = library_runner(plan.library, stream)
                if signature is not None:
                    self._fast[signature[0]] = FastEntry(plan.served, library)
        if plan.library is not None:
            library(arrays, handle, ())
            return plan.served
        with self._lock:
            bound = self._bind(family, problem, handle, plan.workspace)
            pointers = {
                **{name: d.pointer for name, d in described.items()},
                **{name: int(buf.handle) for name, buf in bound.workspace.items()},
            }
            if pointers != bound.pointers:  # arguments and tensor maps encoded once per set of addresses
                bound.run = steps_launcher(
                    bound.stream, [(kernel, geo, pack(args, pointers)) for kernel, geo, args in plan.steps]
                )
                bound.pointers = pointers
            run = bound.run
            assert run is not None  # set above on the first call: ``bound.pointers`` starts as None
            if signature is not None and len(plan.steps) == 1:
                kernel, geometry, args = plan.steps[0]
                direct = DirectLaunch(kernel, geometry, args, pointers, handle, tuple(arrays)).run
                # tensor maps are encoded on their buffers' addresses: fast again only on the same ones
                fast = direct if repointable(args) else on_addresses(arrays, direct)
                self._fast[signature[0]] = FastEntry(plan.served, fast)
            elif signature is not None:  # a graph of several launches: fast again on the same addresses
                graph = run
                self._fast[signature[0]] = FastEntry(plan.served, on_addresses(arrays, lambda _a, _s, _p: graph()))
        run()
        return plan.served

    def bind(
        self,
        family_name: str,
        arrays: dict[str, Any],
        stream: int | None = None,
        *,
        use: str = "auto",
        **options: Any,
    ) -> BoundLaunch:
        """Run the call once, as ``__call__`` does, and return it bound to ``arrays`` for the next ones
        (``bound.py``: each re-reads only the tensors' addresses, shapes and contiguity and the stream)."""
        self(family_name, arrays, stream, use=use, **options)
        again = functools.partial(self, family_name, arrays, stream, use=use, **options)
        signature = torch_signature(family_name, arrays, stream, use, options)
        if signature is None:  # no fast entry: every call takes the full path
            return BoundLaunch(arrays, 0, stream is not None, again)
        key = signature[0]
        fast = FastSource(lambda: self._fast.get(key), lambda: self._fast_version)
        return BoundLaunch(arrays, signature[1], stream is not None, again, fast)

    def _plan(
        self,
        family: Family[Any],
        problem: Problem,
        use: str,
        torch_arrays: bool,
        arrays: Mapping[str, Any],
        handle: int,
        offset: tuple[str, ...],
    ) -> _Plan:
        """Everything a launch of ``problem`` needs but the caller's pointers, worked out once: the
        decision, and the (kernel, geometry, arguments) of each launch, prologue first, or the library
        call. Arrays at ``offset`` (misaligned) are never raced on or given to a kernel."""
        answer = self.choose(family, problem) if offset else self._answer(family, problem, torch_arrays, arrays, handle)
        library = library_form(family, problem) if torch_arrays else None
        served = decide(answer, library, torch_arrays, use, offset)
        if served.ran == "library":
            assert library is not None
            return _Plan(served, (), library_call(library, family.buffers(problem)))
        config = family.config(answer.config)
        return _Plan(served, self.steps(family, problem, config), None, workspace_of(family, problem, config))

    def _answer(
        self, family: Family[Any], problem: Problem, torch_arrays: bool, arrays: Mapping[str, Any], handle: int
    ) -> LookupResult:
        """The lookup's answer; for an untuned problem, a result raced before (any process), or per
        the ``tune`` policy a race now or in the background (``first_use.py``)."""
        answer = self.choose(family, problem)
        if answer.source == "exact":
            return answer
        known = self._raced.get((family.name, problem))
        if known is not None:
            return known
        if self.raced_path.exists():
            earlier = shared(self.raced_path).lookup(family, problem, self.device_info())  # kept open
            if earlier.source == "exact":
                return dataclasses.replace(earlier, source="raced")
        if self.tune == "off" or not torch_arrays:
            return answer
        if self.tune == "background":
            self._race_in_background(family, problem, answer, arrays, handle)
            return answer
        return self._race(family, problem, answer, arrays, handle)

    def _race(
        self, family: Family[Any], problem: Problem, answer: LookupResult, arrays: Mapping[str, Any], handle: int
    ) -> LookupResult:
        """Race at ``problem`` on ``arrays`` (stream ``handle``), keep the result, return its answer."""
        others = [
            *portfolio(self.db_path, family.name),
            *(w.config for w in self._lookup.winners(family, self.device_info(), near=problem)),
        ]
        entrants = candidates(family, problem, answer, others)
        result = race(
            family,
            problem,
            arrays,
            entrants,
            lambda config: self.steps(family, problem, config),
            handle,
            self._race_samples,
            self._race_budget_s,
        )
        keep(self.raced_path, family, problem, self.device_info(), result, family.work(problem))
        raced = answer_of(answer, result, problem.key())
        self._raced[(family.name, problem)] = raced
        self.races.append(result)
        return raced

    def _race_in_background(
        self, family: Family[Any], problem: Problem, answer: LookupResult, arrays: Mapping[str, Any], handle: int
    ) -> None:
        """Race on copies of the inputs (made on the caller's stream now) on a stream of its own; when
        it is done, drop the problem's plans and the launches bound for them, so that the next launch
        uses the result."""
        import torch

        inputs = {b.name for b in family.buffers(problem) if b.role == "input"}
        with torch.cuda.stream(torch.cuda.ExternalStream(handle)):
            copies = {name: (t.clone() if name in inputs else t) for name, t in arrays.items()}
            ready = torch.cuda.Event()
            ready.record()

        def work() -> None:
            self._ensure_device()
            self._device.set_current()
            side = torch.cuda.Stream()
            side.wait_event(ready)
            try:
                self._race(family, problem, answer, copies, side.cuda_stream)
            except Exception:  # the launches go on with the answer they have; the failure is logged
                log.exception("%s %s: the background race failed", family.name, problem.key())
                return
            with self._lock:
                for key in [k for k in self._plans if k[0] == family.name and k[1] == problem]:
                    del self._plans[key]
                for (name, bound_problem, _), bound in self._bindings.items():
                    if name == family.name and bound_problem == problem:
                        bound.pointers = None  # the launches made for the old plan are made again
                self._fast.clear()
                self._fast_version += 1

        threading.Thread(target=work, name=f"tunebox-race-{family.name}", daemon=True).start()

    def steps(self, family: Family[Any], problem: Problem, config: Config) -> tuple[_Step, ...]:
        """The loaded launches (prologue first) of ``config`` at ``problem``: checked, rendered,
        compiled once per source (or loaded from the CUBIN cache). Raises CompileError."""
        family.check(problem, config)
        source = family.render(problem, config)
        self._ensure_device()
        assert self._builder is not None
        built = self._builds.get(source) or self._builder.build_one(source)
        self._builds[source] = built
        if built.status is not Status.OK:
            raise CompileError(
                f"{family.name} {config.label()}: the chosen variant did not compile ({built.status.value}); see .log",
                built.log,
            )
        variant = variant_of(family, problem, config, built)
        return tuple(
            (
                load_kernel(built.cubin, step.kernel, step.geometry.shared_bytes, self._device.device_id),
                step.geometry,
                step.args,
            )
            for step in variant.launches
        )

    def _bind(self, family: Family[Any], problem: Problem, handle: int, workspace: tuple[BufferSpec, ...]) -> _Binding:
        """``problem``'s binding to the stream ``handle``, holding ``workspace`` (the buffers the plan's
        launches use): each allocated on first use and kept (launches on other streams get their own;
        a later plan of the problem, after a race, adds what it needs), and the last launches made."""
        from cuda.core import Stream

        key = (family.name, problem, handle)
        if key not in self._bindings:
            self._bindings[key] = _Binding(Stream.from_handle(handle), {})
        bound = self._bindings[key]
        for spec in workspace:
            if spec.name not in bound.workspace:
                size = max(1, spec.nbytes)
                bound.workspace[spec.name] = self._device.allocate(size, stream=bound.stream)
                if spec.zeroed:
                    zero_bytes(bound.workspace[spec.name], size, bound.stream)
        return bound


def workspace_of(family: Family[Any], problem: Problem, config: Config) -> tuple[BufferSpec, ...]:
    """The workspace buffers of ``problem`` that ``config``'s launches (prologue included) name, by
    address or through a tensor map: a gemm that does not split K needs none of split-K's 32 MiB."""
    args = (*family.args(problem, config), *(a for step in family.prologue(problem, config) for a in step.args))
    used = {a.name for a in args if isinstance(a, BufferArg)} | {a.buffer for a in args if isinstance(a, TensorMapArg)}
    return tuple(b for b in family.buffers(problem) if b.role == "workspace" and b.name in used)


def _problem_of(family: Family[Any], arrays: Mapping[str, DeviceArray], options: Mapping[str, Any]) -> Problem:
    """The problem ``arrays`` and ``options`` describe; a missing array is an InvalidProblem naming it."""
    try:
        problem: Problem = family.problem_from_arrays(arrays, **options)
    except NotImplementedError as exc:  # a family without caller arrays (the test family faults)
        raise InvalidProblem(f"{exc}: it is tuned and tested only") from exc
    except KeyError as exc:
        missing = exc.args[0] if exc.args else None
        if not isinstance(missing, str) or missing in arrays:
            raise
        raise InvalidProblem(
            f"{family.name} needs an array named {missing!r} (got {sorted(arrays) or 'none'}): pass each "
            "input and output by its buffer name, as the README's launch examples do"
        ) from exc
    return problem


def _check_buffers(family: Family[Any], problem: Problem, described: Mapping[str, DeviceArray]) -> None:
    """Every buffer of ``problem`` but workspace is given with its shape and type; outputs are writable."""
    for spec in family.buffers(problem):
        got = described.get(spec.name)
        if spec.role != "workspace" and (got is None or got.shape != spec.shape or not stores(spec.dtype, got.dtype)):
            raise InvalidProblem(f"{family.name}: buffer {spec.name} must be {spec.dtype}{list(spec.shape)}")
        if spec.role == "output" and got is not None and got.readonly:
            raise InvalidProblem(f"{family.name}: {spec.name} is written, but its producer exported it read-only")


@dataclass
class _Binding:
    """A plan on one stream: the stream, its workspace buffers (name -> Buffer), and the callable
    running the variant on the last caller addresses (rebuilt when the addresses change)."""

    stream: Any
    workspace: dict[str, Any]
    pointers: dict[str, int] | None = None
    run: Callable[[], None] | None = None


_default: Launcher | None = None


ENV_TUNE = "TUNEBOX_TUNE"  # the process-wide launcher's first-use policy (default "off")


def default_launcher() -> Launcher:
    """The process-wide ``Launcher`` (winners from ``default_db()``, the first-use policy from
    ``TUNEBOX_TUNE``), made on first use."""
    global _default
    if _default is None:
        policy = os.environ.get(ENV_TUNE, "off")
        if policy not in POLICIES:
            raise InvalidProblem(f"the environment variable {ENV_TUNE}={policy!r} is not one of {POLICIES}")
        _default = Launcher(tune=policy)  # type: ignore[arg-type]
    return _default


def launch(
    family_name: str, arrays: dict[str, Any], stream: int | None = None, *, use: str = "auto", **options: Any
) -> Served:
    """Launch with the process-wide ``Launcher``; see ``Launcher.__call__``."""
    return default_launcher()(family_name, arrays, stream, use=use, **options)


def bind(
    family_name: str, arrays: dict[str, Any], stream: int | None = None, *, use: str = "auto", **options: Any
) -> BoundLaunch:
    """``launch`` once, and the same call bound to ``arrays`` for the next ones (process-wide ``Launcher``;
    see ``Launcher.bind``)."""
    return default_launcher().bind(family_name, arrays, stream, use=use, **options)
