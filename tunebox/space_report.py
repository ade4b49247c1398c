"""How big a sweep's conditional space is and how much of it is valid, per problem and template.

The search draws only from the valid configurations (``search.strategy``), so every configuration a
sweep proposes is valid; this report says how many there are to draw from.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sweep_spec import SweepSpec


@dataclass(frozen=True)
class TemplateCount:
    template: str
    size: int  # configurations of the template's slice of the space
    valid: int  # of which break no validity rule for the problem

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


def space_report(spec: SweepSpec) -> tuple[ProblemSpace, ...]:
    """Per problem of the sweep, each kept template's size and valid count."""
    family = spec.family
    report = []
    for named in spec.problems:
        counts = []
        for name, space in spec.space.templates:
            template = family.templates[name]
            valid = sum(
                not template.violations(named.problem, template.config_type(**config.as_dict())) for config in space
            )
            counts.append(TemplateCount(name, space.size(), valid))
        report.append(ProblemSpace(named.name, tuple(counts)))
    return tuple(report)
