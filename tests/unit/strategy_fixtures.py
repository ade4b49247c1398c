"""A small conditional space with stand-in rules and a smooth cost, for the strategy tests."""

from __future__ import annotations

from tunebox.params import TEMPLATE, Config, Param, Space, TemplateSpaces
from tunebox.records import EvalRecord, Status, Timing

SPACE = TemplateSpaces(
    (
        ("vector", Space((Param("BM", (1, 2, 4, 8)), Param("BN", (16, 32, 64)), Param("vec", (2, 4, 8))))),
        ("ring", Space((Param("BM", (1, 2, 4, 8)), Param("stages", (1, 2, 3, 4))))),
    )
)


def is_valid(c: Config) -> bool:
    """A stand-in for a family's rules: vectors divide BN, BM * vec <= 32; stages <= BM."""
    if c[TEMPLATE] == "vector":
        return int(c["BN"]) % int(c["vec"]) == 0 and int(c["BM"]) * int(c["vec"]) <= 32
    return int(c["stages"]) <= int(c["BM"])


VALID = [c for c in SPACE if is_valid(c)]


def cost(values: dict) -> float:
    """A smooth stand-in for a variant's time (ms): ring with BM=8, stages=3 is the fastest."""
    if values[TEMPLATE] == "ring":
        return 1.0 + abs(values["BM"] - 8) / 4 + abs(values["stages"] - 3) / 2
    return 3.0 + values["vec"] / 8 + values["BM"] / 8


def record(values: dict, status: Status = Status.OK) -> EvalRecord:
    timing = Timing((cost(values),) * 10) if status is Status.OK else None
    return EvalRecord("demo", {}, dict(values), status, timing=timing)


def drain(strategy, limit: int = 1000) -> list[dict]:
    asked = []
    for _ in range(limit):
        ask = strategy.ask()
        if ask is None:
            break
        asked.append(ask.values)
        strategy.tell(ask, record(ask.values))
    return asked
