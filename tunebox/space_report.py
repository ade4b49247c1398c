"""How big a sweep's conditional space is and how much of it is valid, per problem and template.

The search draws only from the valid configurations (``search.strategy``), so every configuration a
sweep proposes is valid; this report says how many there are to draw from. A template's slice larger than
``limit`` configurations (``tunebox space``: ``REPORT_DRAWS``) is counted on a uniform sample of it
(``search/candidates.py``) and its valid count estimated from that.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .params import TemplateSpaces
from .search.candidates import candidates, valid_for
from .search.loop_settings import LoopSettings
from .sweep_spec import SweepSpec


@dataclass(frozen=True)
class TemplateCount:
    template: str
    size: int  # configurations of the template's slice of the space
    valid: int  # of which break no validity rule for the problem (estimated: from a sample of it)
    estimated: bool = False

    @property
    def fraction(self) -> float:
        return self.valid / self.size if self.size else 0.0


@dataclass(frozen=True)
class ProblemSpace:
    name: str
    templates: tuple[TemplateCount, ...]

    @property
    def size(self) -> int:
        return sum(t.size for t in self.templates)

    @property
    def valid(self) -> int:
        return sum(t.valid for t in self.templates)

    @property
    def estimated(self) -> bool:
        return any(t.estimated for t in self.templates)


REPORT_DRAWS = 20_000  # configurations a template's slice is estimated from in `tunebox space` (about 0.5 s)


def space_report(spec: SweepSpec, limit: int = LoopSettings.enumerated) -> Iterator[ProblemSpace]:
    """Per problem of the sweep in turn, each kept template's size and valid count (estimated from
    ``limit`` configurations drawn uniformly where the template holds more)."""
    family = spec.family
    for named in spec.problems:
        counts = []
        for name, space in spec.space.templates:
            drawn = candidates(
                TemplateSpaces(((name, space),)),
                valid_for(family, named.problem),
                seed=0,
                limit=limit,
            )
            valid = len(drawn.configs)
            if drawn.sampled:
                valid = round(valid * space.size() / drawn.checked)
            counts.append(TemplateCount(name, space.size(), valid, drawn.sampled))
        yield ProblemSpace(named.name, tuple(counts))
