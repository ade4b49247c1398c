"""A family is one ``Operation`` (what a problem means) plus ``KernelTemplate``s (ways to compute it).

The operation parses problems and owns everything that does not depend on how a kernel is written:
buffers, seeded inputs, the numpy reference, tolerance, work, distance, the library baselines and
the problem that a caller's arrays describe. Each template (a transport or a path: tile_copy's
vector / cp_async / tma, gemm's mma / wgmma / padded, ...) owns a frozen, typed configuration
dataclass, its own small space (derived from that dataclass), validity rules over it, rendering,
launch geometry and kernel arguments.

``Family`` composes them for the engine: its space is conditional (a template, then that
template's parameters), and every call is routed to the template a configuration names, with the
configuration converted to the template's dataclass, so family code never reads a string-keyed dict
and never downcasts a problem.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from ..errors import InvalidConfig
from ..params import TEMPLATE, Config, Param, Space, TemplateSpaces, Value
from ..records import canonical_json
from ..source_graph import cuda_closure, digest, python_closure
from .base import (
    Arg,
    Baseline,
    BufferSpec,
    Instantiation,
    KernelLaunch,
    KernelSource,
    LaunchGeometry,
    Problem,
    Tolerance,
    Work,
)
from .kernel_args import arg_structs

P = TypeVar("P", bound=Problem)
C = TypeVar("C", bound="TemplateConfig")


def choice(*values: Value, doc: str = "") -> Any:
    """A tunable field of a template's configuration dataclass: its finite domain and what it means."""
    return dataclasses.field(metadata={"choices": values, "doc": doc})


@dataclass(frozen=True)
class TemplateConfig:
    """Base of the templates' configuration dataclasses: every field is declared with ``choice``."""

    @classmethod
    def space(cls) -> Space:
        return Space(
            tuple(
                Param(f.name, tuple(f.metadata["choices"]), f.metadata.get("doc", "")) for f in dataclasses.fields(cls)
            )
        )

    def values(self) -> dict[str, Value]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Operation(abc.ABC, Generic[P]):
    """What a family computes, independent of any kernel. Subclasses are stateless."""

    name: ClassVar[str]
    fields: ClassVar[Mapping[str, str]]  # problem field -> what it means (for ``tunebox families``)
    # fields of a problem's dict form that say how its seeded inputs are drawn (rates, lengths, the
    # caller's promise), not which problem it is: a caller's arrays cannot tell them
    draws: ClassVar[frozenset[str]] = frozenset()
    # fields a caller's arrays give to ``from_arrays`` (shapes, types); the others but ``draws`` are options
    array_fields: ClassVar[frozenset[str]] = frozenset()

    @abc.abstractmethod
    def parse(self, data: Mapping[str, Any]) -> P:
        """Validate a problem description (raises InvalidProblem with a one-line reason)."""

    @abc.abstractmethod
    def buffers(self, problem: P) -> tuple[BufferSpec, ...]: ...

    @abc.abstractmethod
    def make_inputs(self, problem: P, rng: np.random.Generator) -> dict[str, np.ndarray]: ...

    @abc.abstractmethod
    def reference(self, problem: P, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Expected contents of every output buffer (bit-exact for data movement)."""

    @abc.abstractmethod
    def work(self, problem: P) -> Work: ...

    @abc.abstractmethod
    def distance(self, a: P, b: P) -> float | None:
        """How far apart two problems are for the nearest-problem fallback; None if incomparable."""

    def tolerance(self, problem: P, inputs: Mapping[str, np.ndarray]) -> Tolerance | None:
        """None: outputs must match the reference bit for bit (data movement). Arithmetic operations
        return the tolerance of their float outputs for these inputs."""
        return None

    def baselines(self, problem: P) -> tuple[Baseline, ...]:
        """Every library call a user might make instead, the main one first (imports torch)."""
        raise NotImplementedError(f"{self.name} has no library baseline")

    def launch_options(self, problem: P) -> dict[str, Any]:
        """The options a caller passes to ``tunebox.launch`` (with arrays of ``problem``'s buffers) for
        ``problem``: by default its fields but the arrays' and the draws."""
        skip = self.array_fields | self.draws
        return {k: v for k, v in problem.to_dict().items() if k not in skip}

    def from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> P:
        """The problem that the caller's arrays (name -> object with ``shape`` and ``dtype``) and
        options describe, for ``tunebox.launch``."""
        raise NotImplementedError(f"{self.name} cannot be launched on caller arrays")


class KernelTemplate(abc.ABC, Generic[P, C]):
    """One way to compute an operation: a kernel source and the typed configuration it takes."""

    name: ClassVar[str]
    config_type: ClassVar[type[TemplateConfig]]
    kernel: ClassVar[str]  # the device source, relative to kernels/ (its includes are found from it)
    # every rule ``violations`` can require (``tunebox.rules``), each of which some problem and
    # configuration break (the conformance test shows each holding and breaking)
    rule_names: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def default(self, problem: P) -> C | None:
        """A configuration that needs no tuning for ``problem`` (None: this template has none)."""

    @abc.abstractmethod
    def violations(self, problem: P, config: C) -> list[str]:
        """Every validity rule ``config`` breaks for ``problem`` (empty when valid): the messages of a
        ``tunebox.rules.Rules`` owned by the template's name, whose rules are ``rule_names``."""

    @abc.abstractmethod
    def render(self, problem: P, config: C) -> Instantiation:
        """The kernel and its named configuration (``base.instantiate``)."""

    @abc.abstractmethod
    def geometry(self, problem: P, config: C) -> LaunchGeometry: ...

    @abc.abstractmethod
    def args(self, problem: P, config: C) -> tuple[Arg, ...]: ...

    def prologue(self, problem: P, config: C) -> tuple[KernelLaunch, ...]:
        """Launches of helper kernels before the main one, timed with it (none by default)."""
        return ()


class Family(Generic[P]):
    """An operation and its templates, as the engine sees them (sweeps, the worker, the run time).

    Configurations are ``Config``s of the conditional space: ``template`` names the template, the
    other items are that template's parameters."""

    def __init__(self, operation: Operation[P], templates: tuple[KernelTemplate[P, Any], ...]) -> None:
        if not templates or len({t.name for t in templates}) != len(templates):
            raise ValueError(f"{operation.name}: a family needs templates with distinct names")
        self.operation = operation
        self.templates = {t.name: t for t in templates}
        self.name = operation.name
        self.space = TemplateSpaces(tuple((t.name, t.config_type.space()) for t in templates))

    # -- problems (the operation) ------------------------------------------------------------------
    def parse_problem(self, data: Mapping[str, Any]) -> P:
        return self.operation.parse(data)

    def buffers(self, problem: P) -> tuple[BufferSpec, ...]:
        return self.operation.buffers(problem)

    def make_inputs(self, problem: P, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.operation.make_inputs(problem, rng)

    def reference(self, problem: P, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.operation.reference(problem, inputs)

    def tolerance(self, problem: P, inputs: Mapping[str, np.ndarray]) -> Tolerance | None:
        return self.operation.tolerance(problem, inputs)

    def work(self, problem: P) -> Work:
        return self.operation.work(problem)

    def distance(self, a: P, b: P) -> float | None:
        return self.operation.distance(a, b)

    def identity(self, problem: P) -> str:
        """What identifies ``problem`` whatever its inputs: its canonical key without the operation's
        ``draws``. A caller's problem and a sweep's of the same shapes and options share it."""
        return canonical_json({k: v for k, v in problem.to_dict().items() if k not in self.operation.draws})

    def launch_options(self, problem: P) -> dict[str, Any]:
        return self.operation.launch_options(problem)

    def torch_baselines(self, problem: P) -> tuple[Baseline, ...]:
        return self.operation.baselines(problem)

    def problem_from_arrays(self, arrays: Mapping[str, Any], **options: Any) -> P:
        return self.operation.from_arrays(arrays, **options)

    # -- configurations (routed to their template) -------------------------------------------------
    def config(self, values: Mapping[str, Any]) -> Config:
        """Validate a complete configuration against the conditional space."""
        return self.space.validate(values)

    def typed(self, config: Config) -> tuple[KernelTemplate[P, Any], TemplateConfig]:
        """The template ``config`` names and ``config`` as that template's dataclass."""
        values = dict(config.items)
        template = self.templates[str(values.pop(TEMPLATE))]
        return template, template.config_type(**values)

    def template_config(self, template: str, typed: TemplateConfig) -> Config:
        """The engine's form of a template's typed configuration."""
        return self.space.validate({TEMPLATE: template, **typed.values()})

    def default_config(self, problem: P) -> Config:
        """The first template's default that is valid for ``problem`` (templates in declared order)."""
        for name, template in self.templates.items():
            typed = template.default(problem)
            if typed is not None and not template.violations(problem, typed):
                return self.template_config(name, typed)
        raise InvalidConfig(f"{self.name}: no template has a valid default for {problem.key()}")

    def violations(self, problem: P, config: Config) -> list[str]:
        template, typed = self.typed(config)
        return template.violations(problem, typed)

    def check(self, problem: P, config: Config) -> None:
        """Raise InvalidConfig naming every broken validity rule."""
        broken = self.violations(problem, config)
        if broken:
            raise InvalidConfig(f"{self.name} {config.label()}: " + "; ".join(broken))

    def render(self, problem: P, config: Config) -> KernelSource:
        """The NVRTC source: the template's instantiation with its kernels' argument structs."""
        template, typed = self.typed(config)
        prologue = [(step.kernel, step.args) for step in template.prologue(problem, typed)]
        structs = arg_structs(template.args(problem, typed), prologue)
        return template.render(problem, typed).source(structs)

    def geometry(self, problem: P, config: Config) -> LaunchGeometry:
        template, typed = self.typed(config)
        return template.geometry(problem, typed)

    def args(self, problem: P, config: Config) -> tuple[Arg, ...]:
        template, typed = self.typed(config)
        return template.args(problem, typed)

    def prologue(self, problem: P, config: Config) -> tuple[KernelLaunch, ...]:
        template, typed = self.typed(config)
        return template.prologue(problem, typed)

    # -- what the results depend on ----------------------------------------------------------------
    @cached_property
    def source_files(self) -> tuple[Path, ...]:
        """Every file a result depends on: the Python modules of the operation and the templates and
        all tunebox modules they import (followed through the import graph), and each template's
        kernel with everything it includes (followed through the include graph). Device sources first,
        then modules, each in path order: the order of a checkout (``kernels/`` sorts before ``tunebox/``)
        and of an installed package (``tunebox/kernels/`` among the modules) alike, so the hash does not
        depend on the layout."""
        modules = {sys.modules[type(part).__module__].__file__ for part in (self.operation, *self.templates.values())}
        python = python_closure(tuple(Path(m) for m in modules if m))
        cuda = cuda_closure(tuple(t.kernel for t in self.templates.values()))
        return cuda + python

    def source_hash(self) -> str:
        """Hash of every file in ``source_files`` (16 hex digits; each file's ``source_graph.digest``:
        Python by its syntax tree, device sources by their bytes): a winner stored under another hash
        was measured on other code and is never served as exact."""
        h = hashlib.sha256()
        for path in self.source_files:
            h.update(f"{path.parent.name}/{path.name}".encode())
            h.update(digest(path))
        return h.hexdigest()[:16]
