"""The contract every kernel family fulfils, in Python, with no GPU needed.

A family declares its tunable space, parses problems, states validity rules, renders a variant to
CUDA C++ source, gives its launch geometry and kernel arguments, makes seeded inputs and computes the
numpy reference that defines correct output.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from ..errors import InvalidConfig
from ..kernels_dir import kernel_source, kernels_dir
from ..params import Config, Space
from ..records import canonical_json
from ..tma import TensorMapRequest


@dataclass(frozen=True)
class KernelSource:
    """A rendered variant: NVRTC source, the template instantiation to extract (the main kernel),
    include folders, further kernels of the same module (``helpers``, launched by the family's
    ``prologue``) and an architecture suffix ("a" for sm_90a-only instructions such as wgmma)."""

    code: str
    name_expression: str
    include_dirs: tuple[str, ...]
    helpers: tuple[str, ...] = ()
    arch_suffix: str = ""


@dataclass(frozen=True)
class LaunchGeometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int  # dynamic shared memory per block


@dataclass(frozen=True)
class BufferSpec:
    """A device buffer of a problem. Outputs are poisoned before every launch and verified;
    workspace is scratch a variant may use (allocated once per problem, neither initialised nor
    verified; ``tunebox.launch`` allocates it for the caller)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # element type name, see tunebox.dtypes
    role: Literal["input", "output", "workspace"]


@dataclass(frozen=True)
class BufferArg:
    name: str


@dataclass(frozen=True)
class ScalarArg:
    ctype: Literal["i32", "i64", "u16", "u32", "f32"]
    value: int | float


@dataclass(frozen=True)
class TensorMapArg:
    """A TMA tensor map over buffer ``buffer``, passed by value (``const __grid_constant__
    tb::TensorMap``): ``request`` is encoded at launch time with ``address`` replaced by the buffer's
    device address plus ``offset_bytes`` (signed: the clipping map of ragged3d's pack, RaggedTMA3DTile's
    layout, has its base address BM rows in front of its buffer). The family checks the request with
    ``tma.violations`` before rendering (any 256-byte aligned address plus ``offset_bytes`` stands in for
    the real one, so the offset's alignment is checked too); ``encode`` checks the real one at launch."""

    buffer: str
    request: TensorMapRequest
    offset_bytes: int = 0


Arg = BufferArg | ScalarArg | TensorMapArg


@dataclass(frozen=True)
class KernelLaunch:
    """A launch that runs before a variant's main kernel, in the same timed unit (a copy into
    workspace, say): ``kernel`` names one of the rendered source's ``helpers``."""

    kernel: str
    geometry: LaunchGeometry
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Work:
    """The least work a correct kernel must do: bytes read + written once, and flops."""

    bytes_moved: int
    flops: int = 0


@dataclass(frozen=True)
class Tolerance:
    """How far an arithmetic family's output may be from its float64 reference: an element passes when
    its bits equal the reference's, or ``|got - want| <= atol + rtol * |want|`` (NaN and infinity
    never pass unless bit-identical)."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Baseline:
    """The library call a user would make instead: ``run`` maps input tensors (integer views of
    the input bits, on the GPU) to output tensors; it is verified and timed like a variant."""

    name: str
    run: Callable[[dict[str, Any]], dict[str, Any]]


class Problem(abc.ABC):
    """A family's problem: a frozen dataclass with a canonical dict form."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]: ...

    @property
    @abc.abstractmethod
    def dtype(self) -> str: ...

    def key(self) -> str:
        return canonical_json(self.to_dict())


P = TypeVar("P", bound=Problem)


def library_files(*relative: str) -> tuple[Path, ...]:
    """The tile library's header and a family's device sources (paths under kernels/): the files
    whose change invalidates the family's results."""
    return (kernels_dir() / "include" / "tunebox" / "tile.cuh", *(kernels_dir() / r for r in relative))


def instantiate(relative: str, template: str, targs: Iterable[object]) -> KernelSource:
    """The variant ``template<targs...>`` of the device source ``relative`` (under kernels/), with the
    tile library on the include path."""
    return KernelSource(kernel_source(relative), f"{template}<" + ", ".join(map(str, targs)) + ">",
                        (str(kernels_dir() / "include"),))


def problem_as(family: str, problem: Problem, kind: type[P]) -> P:
    """``problem`` as the family's own problem type; any other raises TypeError naming both."""
    if not isinstance(problem, kind):
        raise TypeError(f"{family} needs a {kind.__name__}, got {type(problem).__name__}")
    return problem


class Family(abc.ABC):
    """Base class of kernel families. Subclasses are stateless; one instance per process is fine."""

    name: str
    space: Space
    source_files: tuple[Path, ...]  # device and Python sources whose change invalidates results

    @abc.abstractmethod
    def parse_problem(self, data: Mapping[str, Any]) -> Problem:
        """Validate a problem description (raises InvalidProblem with a one-line reason)."""

    @abc.abstractmethod
    def default_config(self, problem: Problem) -> Config:
        """A variant valid for ``problem`` that needs no tuning: the fallback and the baseline."""

    @abc.abstractmethod
    def violations(self, problem: Problem, config: Config) -> list[str]:
        """Validity rules: every rule ``config`` breaks for ``problem`` (empty when valid)."""

    @abc.abstractmethod
    def render(self, problem: Problem, config: Config) -> KernelSource: ...

    @abc.abstractmethod
    def geometry(self, problem: Problem, config: Config) -> LaunchGeometry: ...

    @abc.abstractmethod
    def buffers(self, problem: Problem) -> tuple[BufferSpec, ...]: ...

    @abc.abstractmethod
    def args(self, problem: Problem, config: Config) -> tuple[Arg, ...]: ...

    def prologue(self, problem: Problem, config: Config) -> tuple[KernelLaunch, ...]:
        """Launches of helper kernels before the main one, timed with it (none by default)."""
        return ()

    @abc.abstractmethod
    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]: ...

    @abc.abstractmethod
    def reference(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Expected contents of every output buffer (bit-exact for data movement)."""

    @abc.abstractmethod
    def work(self, problem: Problem) -> Work: ...

    @abc.abstractmethod
    def distance(self, a: Problem, b: Problem) -> float | None:
        """How far apart two problems are for the nearest-problem fallback; None if incomparable."""

    def tolerance(self, problem: Problem, inputs: Mapping[str, np.ndarray]) -> Tolerance | None:
        """None: outputs must match the reference bit for bit (data movement). Arithmetic families
        return the tolerance of their float outputs for these inputs."""
        return None

    def torch_baseline(self, problem: Problem) -> Baseline:
        """The equivalent torch operation (imports torch); families without one raise."""
        raise NotImplementedError(f"{self.name} has no torch baseline")

    def torch_baselines(self, problem: Problem) -> tuple[Baseline, ...]:
        """Every torch operation a user might call instead, the main one first (each is verified and
        timed in the finalists' rotation); by default ``torch_baseline`` alone."""
        return (self.torch_baseline(problem),)

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> Problem:
        """The problem that the caller's arrays (name -> object with ``shape`` and ``dtype``) and
        options describe, for ``tunebox.launch``."""
        raise NotImplementedError(f"{self.name} cannot be launched on caller arrays")

    def config(self, values: Mapping[str, Any]) -> Config:
        """Validate a complete configuration against the declared domains."""
        return self.space.validate(values)

    def check(self, problem: Problem, config: Config) -> None:
        """Raise InvalidConfig naming every broken validity rule."""
        broken = self.violations(problem, config)
        if broken:
            raise InvalidConfig(f"{self.name} {config.label()}: " + "; ".join(broken))

    def source_hash(self) -> str:
        """Hash of every file that changes this family's kernels or results (16 hex digits)."""
        h = hashlib.sha256()
        for path in sorted(self.source_files):
            h.update(path.name.encode())
            h.update(path.read_bytes())
        return h.hexdigest()[:16]
