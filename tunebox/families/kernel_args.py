"""A kernel's arguments as one named struct whose layout both sides derive from one description.

A template's ``args`` (``BufferArg`` / ``ScalarArg`` / ``TensorMapArg``, each with its member name)
are the description. From it, ``ArgStruct`` renders the C++ struct the kernel takes by value
(``const __grid_constant__ typename Cfg::Args a``), with a ``static_assert`` of every member's size
and alignment and of the struct's: C++ places each member at the next offset aligned for it, as
``ArgStruct.of`` does, so equal sizes and alignments prove equal offsets (NVRTC 13.0 has no
``offsetof``). The host packs the struct's bytes at those offsets and launches with that one
parameter.
Members are laid out in the given order with C's natural alignment (pointers and 64-bit scalars
8 bytes, tensor maps 128 bytes aligned to 64).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidConfig
from .base import Arg, BufferArg, ScalarArg, TensorMapArg

SCALARS = {
    "i32": ("int", 4),
    "i64": ("long long", 8),
    "u16": ("unsigned short", 2),
    "u32": ("unsigned int", 4),
    "f32": ("float", 4),
}  # ctype -> (C++ type, size = alignment)
POINTER_BYTES = 8
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN = 128, 64
_POINTEE = re.compile(r"[A-Za-z_][A-Za-z0-9_:]*( [A-Za-z_][A-Za-z0-9_:]*)*")


@dataclass(frozen=True)
class Member:
    name: str
    declaration: str  # C++ type of the member
    offset: int  # bytes from the struct's start
    size: int
    align: int


@dataclass(frozen=True)
class ArgStruct:
    """The layout of one kernel's argument struct."""

    type_name: str
    members: tuple[Member, ...]
    size: int
    align: int

    @classmethod
    def of(cls, type_name: str, args: Sequence[Arg]) -> ArgStruct:
        members, offset, align = [], 0, 1
        for arg in args:
            name, declaration, size, alignment = _describe(arg)
            offset = -(-offset // alignment) * alignment
            members.append(Member(name, declaration, offset, size, alignment))
            offset += size
            align = max(align, alignment)
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise InvalidConfig(f"{type_name}: argument names repeat: {names}")
        return cls(type_name, tuple(members), -(-offset // align) * align, align)

    def source(self) -> str:
        """The C++ struct, with the layout checked member by member at compile time."""
        lines = [f"struct {self.type_name} {{", *(f"  {m.declaration} {m.name};" for m in self.members), "};"]
        lines += [
            f"static_assert(sizeof(decltype({self.type_name}::{m.name})) == {m.size} && "
            f"alignof(decltype({self.type_name}::{m.name})) == {m.align}, "
            f'"argument {m.name}: host and device layouts differ");'
            for m in self.members
        ]
        lines.append(
            f"static_assert(sizeof({self.type_name}) == {self.size} && alignof({self.type_name}) == "
            f'{self.align}, "{self.type_name}: host and device layouts differ");'
        )
        return "\n".join(lines) + "\n"


def _describe(arg: Arg) -> tuple[str, str, int, int]:
    """(member name, C++ type, size, alignment) of one argument."""
    if isinstance(arg, BufferArg):
        if not _POINTEE.fullmatch(arg.pointee):
            raise InvalidConfig(f"buffer argument {arg.name}: pointee {arg.pointee!r} is not a C++ type")
        return arg.name, f"{arg.pointee}*", POINTER_BYTES, POINTER_BYTES
    if isinstance(arg, TensorMapArg):
        return _named(arg.name, arg), "tb::TensorMap", TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN
    ctype, size = SCALARS[arg.ctype]
    return _named(arg.name, arg), ctype, size, size


def _named(name: str, arg: ScalarArg | TensorMapArg) -> str:
    if not name.isidentifier():
        raise InvalidConfig(f"a kernel argument needs a member name, got {name!r} for {arg}")
    return name


def arg_structs(args: Sequence[Arg], prologue: Sequence[tuple[str, Sequence[Arg]]]) -> dict[str, str]:
    """The argument structs of a variant's kernels, by their alias in ``Cfg``: ``Args`` for the main
    kernel, ``<helper>_args`` for each prologue helper."""
    wanted = [("Args", args), *((f"{kernel}_args", a) for kernel, a in prologue)]
    return {alias: ArgStruct.of(f"{alias}_t", a).source() for alias, a in wanted}
