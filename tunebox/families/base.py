"""The data a family hands the engine: rendered sources, launch geometry, buffers, kernel arguments,
work, tolerance and library baselines; and the named configuration struct a variant's kernel takes.

The family contract itself (an operation and its kernel templates) is in ``contract.py``.
"""

from __future__ import annotations

import abc
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..dtypes import buffer_type
from ..errors import InvalidConfig
from ..kernels_dir import kernel_source, kernels_dir
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
    verified; ``tunebox.launch`` allocates it for the caller). A ``zeroed`` workspace holds zeros
    when allocated and before every verified launch, and the kernels using it leave it zero (the
    arrival counters of split-K, say)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # element type name, see tunebox.dtypes
    role: Literal["input", "output", "workspace"]
    zeroed: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes the buffer holds (0 for an empty shape: allocators take at least 1)."""
        return math.prod(self.shape) * buffer_type(self.dtype).itemsize


@dataclass(frozen=True)
class BufferArg:
    """The device address of buffer ``name``; in the kernel's argument struct a member ``name`` of
    type ``pointee*`` (``pointee`` a C++ type such as ``const float``)."""

    name: str
    pointee: str = ""


@dataclass(frozen=True)
class ScalarArg:
    """A value of C type ``ctype``; in the kernel's argument struct the member ``name``."""

    ctype: Literal["i32", "i64", "u16", "u32", "f32"]
    value: int | float
    name: str = ""


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
    name: str = ""  # the member of the kernel's argument struct


Arg = BufferArg | ScalarArg | TensorMapArg


@dataclass(frozen=True)
class KernelLaunch:
    """A launch that runs before a variant's main kernel, in the same timed unit (a copy into
    workspace, say): ``kernel`` names one of the rendered source's ``helpers`` (``pad_rows`` for
    ``pad_rows<Cfg>``)."""

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
    the input bits, on the GPU) to output tensors; it is verified and timed like a variant. ``into``,
    where the library can write into given tensors, is the same call on the caller's own (typed)
    tensors, writing its outputs in place: what ``tunebox.launch`` serves."""

    name: str
    run: Callable[[dict[str, Any]], dict[str, Any]]
    into: Callable[[dict[str, Any], dict[str, Any]], object] | None = None  # what it returns is not read


class Problem(abc.ABC):
    """A family's problem: a frozen dataclass with a canonical dict form."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]: ...

    @property
    @abc.abstractmethod
    def dtype(self) -> str: ...

    def key(self) -> str:
        return canonical_json(self.to_dict())


@dataclass(frozen=True)
class CType:
    """A C++ type as a member of a kernel's configuration struct (``using T = float;``)."""

    name: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)*", self.name):
            raise InvalidConfig(f"{self.name!r} is not a C++ type name")


CONFIG_STRUCT = "Cfg"  # the one template argument of every kernel: ``template <class Cfg>``


def config_struct(members: Mapping[str, int | bool | CType]) -> str:
    """The named configuration struct of a variant: each member a ``static constexpr int`` / ``bool``
    or a ``using`` type alias, read in the kernel as ``Cfg::NAME``. Binding by name means two swapped
    values cannot compile into a wrong kernel; every member must exist in the kernel's reads."""
    lines = [f"struct {CONFIG_STRUCT} {{"]
    for name, value in members.items():
        if not name.isidentifier():
            raise InvalidConfig(f"configuration member {name!r} is not an identifier")
        if isinstance(value, CType):
            lines.append(f"  using {name} = {value.name};")
        elif isinstance(value, bool):
            lines.append(f"  static constexpr bool {name} = {str(value).lower()};")
        elif isinstance(value, int) and -(2**31) <= value < 2**31:
            lines.append(f"  static constexpr int {name} = {value};")
        else:
            raise InvalidConfig(f"configuration member {name}={value!r} is not a C++ int, bool or type")
    return "\n".join([*lines, "};", ""])


@dataclass(frozen=True)
class Instantiation:
    """What a template renders: ``kernel<Cfg>`` (and ``helpers``, also ``<Cfg>``) of the device source
    ``relative`` (under kernels/), ``Cfg`` the named configuration struct of ``members``. The family
    adds the kernels' argument structs (``Family.render``) and makes the ``KernelSource``."""

    relative: str
    kernel: str
    members: tuple[tuple[str, int | bool | CType], ...]
    helpers: tuple[str, ...] = ()
    arch_suffix: str = ""

    def source(self, arg_structs: Mapping[str, str] = {}) -> KernelSource:  # noqa: B006 (read only)
        """The NVRTC source: the device source, then ``arg_structs`` (member alias -> struct text:
        the text defines ``struct <alias>_t``), then ``Cfg`` with an alias of each (``Cfg::Args``)."""
        structs = "".join(arg_structs.values())
        aliases = {alias: CType(f"{alias}_t") for alias in arg_structs}
        code = kernel_source(self.relative) + "\n" + structs + config_struct({**dict(self.members), **aliases})
        return KernelSource(
            code,
            f"{self.kernel}<{CONFIG_STRUCT}>",
            (str(kernels_dir() / "include"),),
            tuple(f"{h}<{CONFIG_STRUCT}>" for h in self.helpers),
            self.arch_suffix,
        )


def instantiate(
    relative: str,
    kernel: str,
    members: Mapping[str, int | bool | CType],
    helpers: tuple[str, ...] = (),
    arch_suffix: str = "",
) -> Instantiation:
    """The variant ``kernel<Cfg>`` of the device source ``relative`` (under kernels/), ``Cfg`` the named
    configuration struct of ``members`` (defined after the source, so it may use its types), with the
    tile library on the include path; ``helpers`` are further kernels of the source, also ``<Cfg>``."""
    for name, value in members.items():  # refused here, where the template names them
        config_struct({name: value})
    return Instantiation(relative, kernel, tuple(members.items()), helpers, arch_suffix)
