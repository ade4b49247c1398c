"""Declared parameter domains and validated configurations.

A value reaches generated source text only after ``Space.validate`` has checked it against a finite,
typed domain, so a value from a TOML file or a database can never inject code.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidConfig

Value = int | str


@dataclass(frozen=True)
class Param:
    """One tunable parameter: a name and its finite ordered domain (all ints or all strings)."""

    name: str
    choices: tuple[Value, ...]
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise InvalidConfig(f"parameter name {self.name!r} is not an identifier")
        kinds = {type(c) for c in self.choices}
        if not self.choices or len(kinds) != 1 or kinds - {int, str}:
            raise InvalidConfig(f"parameter {self.name}: choices must be all int or all str")

    def check(self, value: Any) -> Value:
        """Return ``value`` if it is one of the choices (exact type match), else raise."""
        kind = type(self.choices[0])
        if type(value) is not kind or value not in self.choices:
            raise InvalidConfig(f"{self.name}={value!r} is outside its domain {list(self.choices)}; pick one of those")
        return value


@dataclass(frozen=True)
class Config:
    """A validated assignment of every parameter of a space; hashable, ordered by name."""

    items: tuple[tuple[str, Value], ...]

    def __getitem__(self, name: str) -> Value:
        for key, value in self.items:
            if key == name:
                return value
        raise KeyError(name)

    def as_dict(self) -> dict[str, Value]:
        return dict(self.items)

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.items)


@dataclass(frozen=True)
class Space:
    """An ordered collection of parameters."""

    params: tuple[Param, ...]

    def __getitem__(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise InvalidConfig(f"unknown parameter {name!r}; known: {[p.name for p in self.params]}")

    def validate(self, values: Mapping[str, Any]) -> Config:
        """Check a complete assignment; unknown names, missing names and foreign values raise."""
        known = {p.name for p in self.params}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidConfig(f"unknown parameter(s) {unknown}; known: {sorted(known)}")
        missing = sorted(known - set(values))
        if missing:
            raise InvalidConfig(f"missing parameter(s) {missing}")
        return Config(tuple(sorted((p.name, p.check(values[p.name])) for p in self.params)))

    def holds(self, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` assigns every parameter one of its choices and nothing else (a logged
        configuration from before the space or the family changed may not)."""
        return set(values) == {p.name for p in self.params} and all(values[p.name] in p.choices for p in self.params)

    def restrict(self, subsets: Mapping[str, Any]) -> Space:
        """A space whose domains are the given subsets (each validated against the full domain)."""
        for name in subsets:
            self[name]  # unknown names raise
        params = []
        for p in self.params:
            if p.name not in subsets:
                params.append(p)
                continue
            chosen = subsets[p.name]
            if not isinstance(chosen, list) or not chosen:
                raise InvalidConfig(f"{p.name}: a restriction must be a non-empty list of values")
            params.append(Param(p.name, tuple(dict.fromkeys(p.check(v) for v in chosen)), p.doc))
        return Space(tuple(params))

    def size(self) -> int:
        n = 1
        for p in self.params:
            n *= len(p.choices)
        return n

    def __iter__(self) -> Iterator[Config]:
        names = [p.name for p in self.params]
        for combo in itertools.product(*(p.choices for p in self.params)):
            yield Config(tuple(sorted(zip(names, combo, strict=True))))


TEMPLATE = "template"  # the configuration item naming the kernel template; no template parameter takes this name


@dataclass(frozen=True)
class TemplateSpaces:
    """A conditional space: a kernel template first, then that template's own parameters. A
    configuration holds ``template`` and exactly the chosen template's parameters, so no
    combination of unrelated parameters exists."""

    templates: tuple[tuple[str, Space], ...]  # (template name, its space), in declared order

    def __post_init__(self) -> None:
        for name, space in self.templates:
            if TEMPLATE in {p.name for p in space.params}:
                raise InvalidConfig(f"template {name}: no parameter may be called {TEMPLATE!r}")

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.templates)

    def template(self, name: Any) -> Space:
        for known, space in self.templates:
            if known == name:
                return space
        raise InvalidConfig(f"unknown template {name!r}; known: {list(self.names())}")

    def validate(self, values: Mapping[str, Any]) -> Config:
        """Check a complete assignment: ``template`` and every parameter of that template."""
        if TEMPLATE not in values:
            raise InvalidConfig(f"a configuration names its template ({TEMPLATE} = one of {list(self.names())})")
        rest = {k: v for k, v in values.items() if k != TEMPLATE}
        config = self.template(values[TEMPLATE]).validate(rest)
        return Config(tuple(sorted((*config.items, (TEMPLATE, values[TEMPLATE])))))

    def holds(self, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` is a configuration of this space (a logged configuration from before the
        space or the family changed may not be)."""
        name = values.get(TEMPLATE)
        if name not in self.names():
            return False
        return self.template(name).holds({k: v for k, v in values.items() if k != TEMPLATE})

    def restrict(self, data: Mapping[str, Any]) -> TemplateSpaces:
        """The slice a sweep file's ``[space]`` table selects: ``template = [...]`` keeps those
        templates (in the order given); a parameter ``name = [...]`` restricts it in every kept
        template that has it; a sub-table ``[space.<template>]`` restricts that template alone."""
        data = dict(data)
        chosen = data.pop(TEMPLATE, list(self.names()))
        if not isinstance(chosen, list) or not chosen:
            raise InvalidConfig(f"{TEMPLATE}: a non-empty list of template names, from {list(self.names())}")
        kept = {name: self.template(name) for name in dict.fromkeys(chosen)}
        tables = {k: v for k, v in data.items() if isinstance(v, dict)}
        for name in tables:
            if name not in kept:
                raise InvalidConfig(f"[space.{name}]: {name!r} is not a kept template; kept: {list(kept)}")
        shared = {k: v for k, v in data.items() if k not in tables}
        for param in shared:
            if not any(param in {p.name for p in s.params} for s in kept.values()):
                raise InvalidConfig(
                    f"no kept template has a parameter {param!r}; "
                    + "; ".join(f"{n}: {[p.name for p in s.params]}" for n, s in kept.items())
                )
        restricted = []
        for name, space in kept.items():
            own = {p.name for p in space.params}
            subsets = {k: v for k, v in shared.items() if k in own} | tables.get(name, {})
            try:
                restricted.append((name, space.restrict(subsets)))
            except InvalidConfig as exc:
                raise InvalidConfig(f"template {name}: {exc}") from None
        return TemplateSpaces(tuple(restricted))

    def size(self) -> int:
        return sum(space.size() for _, space in self.templates)

    def __iter__(self) -> Iterator[Config]:
        for name, space in self.templates:
            for config in space:
                yield Config(tuple(sorted((*config.items, (TEMPLATE, name)))))
