"""The files a family's results depend on, found by following the include and import graphs.

``cuda_closure`` follows ``#include "..."`` and ``#include <tunebox/...>`` from kernel sources (a
header that is found neither beside the including file nor in ``kernels/include`` is a system or
CUDA header and is not followed). ``python_closure`` follows the imports of tunebox modules (absolute
``tunebox.x`` and relative ``.x`` / ``..x`` imports; other packages are not followed).
``digest`` is what a hash of them takes from each file: a Python module's syntax tree without its
docstrings and signature type hints (formatting, comments, documentation and typing change no
result), a device source's bytes. This module computes the hash and changes no result: no closure
holds it.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from .kernels_dir import kernels_dir

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)
_PACKAGE = Path(__file__).resolve().parent
_SELF = Path(__file__).resolve()


def cuda_closure(kernels: tuple[str, ...]) -> tuple[Path, ...]:
    """The kernel sources (paths relative to kernels/) and every header they include, transitively."""
    root = kernels_dir()
    pending = [root / k for k in kernels]
    seen: set[Path] = set()
    while pending:
        path = pending.pop().resolve()
        if path in seen:
            continue
        seen.add(path)
        for name in _INCLUDE.findall(path.read_text()):
            for base in (path.parent, root / "include"):
                if (base / name).is_file():
                    pending.append(base / name)
                    break
    return tuple(sorted(seen))


def python_closure(modules: tuple[Path, ...]) -> tuple[Path, ...]:
    """The given tunebox module files and every tunebox module they import, transitively."""
    pending = [m.resolve() for m in modules]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path in seen or path == _SELF:
            continue
        seen.add(path)
        pending += [p for p in _imported(path) if p not in seen]
    return tuple(sorted(seen))


def digest(path: Path) -> bytes:
    """The part of a source file that can change a result: for Python the syntax tree without
    docstrings and without the type hints of function signatures (so formatting, comments,
    documentation and typing do not void stored winners); else the bytes. The file is read each
    time; a Python text seen before is not parsed again (a lookup that misses its cache hashes the
    family's sources)."""
    text = path.read_bytes()
    return _python_digest(text) if path.suffix == ".py" else text


@cache
def _python_digest(text: bytes) -> bytes:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # type hints of signatures do nothing
            node.returns = None
            for argument in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                argument.annotation = None
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return _canonical(tree).encode()


def _canonical(node: object) -> str:
    """A syntax tree as text that does not change with the Python version: each node's type and its
    named fields, leaving out the empty ones (``ast.dump`` gains fields across versions, such as
    3.12's ``type_params``, and 3.13 drops the empty ones from its output)."""
    if isinstance(node, ast.AST):
        fields = (
            f"{name}={_canonical(value)}"
            for name in node._fields
            if (value := getattr(node, name, None)) is not None and value != []
        )
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(_canonical(item) for item in node)}]"
    return repr(node)


def _imported(path: Path) -> list[Path]:
    """The tunebox module files that ``path`` imports (a package import counts its __init__.py)."""
    package = path.parent.relative_to(_PACKAGE.parent).parts  # ("tunebox", "families", ...)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [tuple(alias.name.split(".")) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = tuple((node.module or "").split(".")) if node.module else ()
            if node.level:
                base = package[: len(package) - node.level + 1] + base
            targets = [base] + [base + (alias.name,) for alias in node.names]
        else:
            continue
        for parts in targets:
            if parts and parts[0] == "tunebox":
                found += _module_files(parts)
    return found


def _module_files(parts: tuple[str, ...]) -> list[Path]:
    """The file of module ``parts`` (a package's __init__.py), if it is one (an imported name is not)."""
    here = _PACKAGE.parent.joinpath(*parts)
    for candidate in (here.with_suffix(".py"), here / "__init__.py"):
        if candidate.is_file():
            return [candidate.resolve()]
    return []
