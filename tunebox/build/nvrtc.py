"""NVRTC compilation to CUBIN with an on-disk cache; needs no GPU and no driver.

Compiles run in a thread pool (NVRTC releases the GIL). A compile error is a ``BuildResult`` with
status ``compile_error`` and the log, never an exception.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..families.base import KernelSource
from ..records import Status
from .isolated import IsolatedCompiler

log = logging.getLogger(__name__)

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_REGS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores")


@dataclass(frozen=True)
class BuildResult:
    source: KernelSource
    arch: str
    status: Status  # OK or COMPILE_ERROR
    cubin: bytes = b""
    lowered_name: str = ""  # the mangled symbol of source.name_expression
    helper_symbols: tuple[str, ...] = ()  # the mangled symbols of source.helpers, in order
    log: str = ""
    registers: int = 0  # as ptxas reported them
    spill_bytes: int = 0
    seconds: float = 0.0
    cache_hit: bool = False

    @property
    def binary_hash(self) -> str:
        """Identity of the compiled binary: identical binaries are evaluated once."""
        return hashlib.sha256(self.cubin).hexdigest()[:16]


@cache
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if int(err) != 0:
        raise RuntimeError(f"nvrtcVersion failed: {err!r}")
    return f"{major}.{minor}"


def _check(result: tuple[Any, ...]) -> Any:
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(repr(err))
    return values[0] if len(values) == 1 else values


@cache
def _headers_digest(include_dirs: tuple[str, ...]) -> str:
    """Digest of every header the include folders hold (read once per process)."""
    h = hashlib.sha256()
    for root in include_dirs:
        for path in sorted(Path(root).rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def compile_nvrtc(source: KernelSource, arch: str, options: list[str]) -> BuildResult:
    """One NVRTC compilation to CUBIN, in this process. Errors are a COMPILE_ERROR result."""
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(source.code.encode(), b"variant.cu", 0, [], []))
    try:
        for expression in (source.name_expression, *source.helpers):
            _check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()))
        opts = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        # NVRTC writes into these buffers: mutable ones. Concurrent compiles sometimes return an empty
        # log (one byte), and ``b" " * 1``, NVIDIA's samples' idiom, is the interpreter's shared b" "
        # (seen on the GPU host: NUL written into b" " and " ").
        buf = bytearray(_check(nvrtc.nvrtcGetProgramLogSize(prog)))
        nvrtc.nvrtcGetProgramLog(prog, buf)
        text = bytes(buf).rstrip(b"\0 ").decode(errors="replace")
        if int(err) != 0:
            return BuildResult(source, arch, Status.COMPILE_ERROR, log=text)
        lowered, *helpers = (
            _check(nvrtc.nvrtcGetLoweredName(prog, e.encode())) for e in (source.name_expression, *source.helpers)
        )
        cubin = bytearray(_check(nvrtc.nvrtcGetCUBINSize(prog)))
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    registers, spill_bytes = _kernel_resources(text, lowered.decode())
    return BuildResult(
        source,
        arch,
        Status.OK,
        cubin=bytes(cubin),
        lowered_name=lowered.decode(),
        helper_symbols=tuple(h.decode() for h in helpers),
        log=text,
        registers=registers,
        spill_bytes=spill_bytes,
    )


def _kernel_resources(log: str, main: str) -> tuple[int, int]:
    """(registers of the main kernel, spill store bytes of all kernels) from ptxas's log, which
    reports each entry function in a section of its own, in no fixed order."""
    starts = list(_ENTRY.finditer(log))
    ends = [m.start() for m in starts[1:]] + [len(log)]
    sections = {m.group(1): log[m.end() : ends[i]] for i, m in enumerate(starts)}
    regs = _REGS.search(sections.get(main, log))
    registers = int(regs.group(1)) if regs else 0
    spills = sum(int(m.group(1)) for m in _SPILLS.finditer(log))
    return registers, spills


class NvrtcBuilder:
    """Compiles ``KernelSource`` to CUBIN for ``arch`` (e.g. "sm_90"), caching by content hash.

    ``cache_dir`` None disables the disk cache. With ``timeout_s`` every compile runs in a helper
    process that is killed when it takes longer (the result is a TIMEOUT record); without it,
    compiles run in this process's threads. ``build`` and ``submit`` are thread-safe.
    """

    def __init__(
        self,
        arch: str = "sm_90",
        cache_dir: Path | None = None,
        workers: int | None = None,
        timeout_s: float | None = None,
    ):
        self.arch = arch
        self.cache_dir = cache_dir
        self._pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2, thread_name_prefix="nvrtc")
        self._isolated = IsolatedCompiler(timeout_s) if timeout_s is not None else None
        self._labels_lock = threading.Lock()

    def options(self, source: KernelSource) -> list[str]:
        return [
            f"--gpu-architecture={self.arch}{source.arch_suffix}",
            "--std=c++17",
            "--ptxas-options=-v",
            "-default-device",
            *(f"-I{d}" for d in source.include_dirs),
        ]

    def cache_key(self, source: KernelSource) -> str:
        h = hashlib.sha256()
        for part in (
            source.code,
            source.name_expression,
            *source.helpers,
            " ".join(self.options(source)),
            nvrtc_version(),
            _headers_digest(source.include_dirs),
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def labelled(self, prefix: str) -> set[str]:
        """What follows ``prefix`` in the labels of the compiles this disk cache stored (``submit``'s
        ``label``; none without a disk cache): a caller learns which of its variants were built without
        rendering each source. A hint: ``cached`` confirms an entry is still there."""
        path = self._labels_path()
        if path is None or not path.is_file():
            return set()
        with path.open(encoding="utf-8", errors="replace") as lines:
            return {line[len(prefix) :].rstrip("\n") for line in lines if line.startswith(prefix)}

    def cached(self, source: KernelSource) -> bool:
        """Whether the disk cache holds an entry for ``source`` (``build_one`` still checks its CUBIN)."""
        if self.cache_dir is None:
            return False
        paths = self._paths(self.cache_key(source))
        return paths is not None and paths[1].exists()

    def load(self, source: KernelSource) -> BuildResult | None:
        """``source``'s CUBIN from the disk cache, read in the caller's thread (no compile queued behind
        the pool's); None where the cache lacks it or holds it damaged."""
        return self._load(self.cache_key(source), source)

    def submit(self, source: KernelSource, label: str | None = None) -> Future[BuildResult]:
        """``source``'s build in the pool; ``label`` (one line) is kept beside the cache entry when
        it is compiled and stored (``labelled``)."""
        return self._pool.submit(self.build_one, source, label)

    def build(self, sources: list[KernelSource]) -> list[BuildResult]:
        return [f.result() for f in [self.submit(s) for s in sources]]

    def close(self, abandon: bool = False) -> None:
        """Stop the pool: queued compiles are cancelled, running ones awaited; with ``abandon`` running
        ones are stopped unfinished where they run in helper processes (nothing is cached for them: a
        sweep's spare asks, whose results nobody reads; at the end of a cold throughput_default run on
        the H200 their wait took the close 0.1 -> 1.6 s, results/benchmarks/command_phases.json)."""
        if self._isolated is None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            return
        self._pool.shutdown(wait=not abandon, cancel_futures=True)  # no job starts after this
        self._isolated.close(abandon=abandon)
        self._pool.shutdown(wait=True)  # abandoned: the threads return once their helpers are gone

    def build_one(self, source: KernelSource, label: str | None = None) -> BuildResult:
        if label is not None and "\n" in label:
            raise ValueError(f"a build label is one line: {label!r}")
        key = self.cache_key(source)
        cached = self._load(key, source)
        if cached is not None:
            return cached
        start = time.perf_counter()
        result = self._compile(source)
        result = BuildResult(**{**result.__dict__, "seconds": time.perf_counter() - start})
        if result.status is Status.OK:
            self._store(key, result)
            if label is not None:
                self._label(label)
        return result

    def _compile(self, source: KernelSource) -> BuildResult:
        if self._isolated is not None:
            return self._isolated.compile(source, self.arch, self.options(source))
        return compile_nvrtc(source, self.arch, self.options(source))

    def _labels_path(self) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / "labels.txt"

    def _label(self, label: str) -> None:
        path = self._labels_path()
        if path is None:
            return
        with self._labels_lock, path.open("a", encoding="utf-8") as labels:
            labels.write(label + "\n")

    def _paths(self, key: str) -> tuple[Path, Path] | None:
        if self.cache_dir is None:
            return None
        base = self.cache_dir / key[:2] / key
        return base.with_suffix(".cubin"), base.with_suffix(".json")

    def _load(self, key: str, source: KernelSource) -> BuildResult | None:
        paths = self._paths(key)
        if paths is None or not paths[1].exists():
            return None
        try:
            meta = json.loads(paths[1].read_text())
            cubin = paths[0].read_bytes()
            if hashlib.sha256(cubin).hexdigest() != meta["sha256"]:
                raise ValueError("checksum mismatch")
            return BuildResult(
                source,
                self.arch,
                Status.OK,
                cubin=cubin,
                lowered_name=str(meta["lowered_name"]),
                helper_symbols=tuple(str(h) for h in meta.get("helper_symbols", ())),
                log=str(meta["log"]),
                registers=int(meta["registers"]),
                spill_bytes=int(meta["spill_bytes"]),
                cache_hit=True,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring damaged cache entry %s: %s", paths[1], exc)
            return None

    def _store(self, key: str, result: BuildResult) -> None:
        paths = self._paths(key)
        if paths is None:
            return
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "lowered_name": result.lowered_name,
            "helper_symbols": list(result.helper_symbols),
            "log": result.log,
            "registers": result.registers,
            "spill_bytes": result.spill_bytes,
            "sha256": hashlib.sha256(result.cubin).hexdigest(),
        }
        for path, data in ((paths[0], result.cubin), (paths[1], json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
