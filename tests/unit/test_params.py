"""Param / Space / Config: complete validated assignments, hostile values, restriction, iteration."""

from __future__ import annotations

import pytest

from tunebox.errors import InvalidConfig
from tunebox.params import Config, Param, Space

SPACE = Space((
    Param("BM", (1, 2, 4, 8), "rows"),
    Param("BN", (32, 64, 128), "cols"),
    Param("mode", ("checked", "split", "unchecked"), "bounds"),
))
GOOD = {"BM": 4, "BN": 64, "mode": "split"}


def test_validate_complete_assignment() -> None:
    cfg = SPACE.validate(GOOD)
    assert isinstance(cfg, Config)
    assert cfg["BM"] == 4 and cfg["BN"] == 64 and cfg["mode"] == "split"
    assert cfg.as_dict() == GOOD
    assert cfg.items == tuple(sorted(GOOD.items()))  # ordered by name
    assert cfg.label() == "BM=4 BN=64 mode=split"
    with pytest.raises(KeyError):
        cfg["threads"]


def test_validate_is_order_independent_and_hashable() -> None:
    a = SPACE.validate(GOOD)
    b = SPACE.validate(dict(reversed(list(GOOD.items()))))
    assert a == b and hash(a) == hash(b)
    assert len({a, b, SPACE.validate({**GOOD, "BM": 8})}) == 2


def test_unknown_name_raises_naming_it() -> None:
    with pytest.raises(InvalidConfig, match="threads"):
        SPACE.validate({**GOOD, "threads": 128})


def test_missing_name_raises_naming_it() -> None:
    values = dict(GOOD)
    del values["BN"]
    with pytest.raises(InvalidConfig, match="BN"):
        SPACE.validate(values)


def test_value_outside_domain_raises_naming_parameter() -> None:
    with pytest.raises(InvalidConfig, match="BM") as info:
        SPACE.validate({**GOOD, "BM": 3})
    assert "3" in str(info.value)
    with pytest.raises(InvalidConfig, match="mode"):
        SPACE.validate({**GOOD, "mode": "CHECKED"})


HOSTILE_INT_VALUES = [
    "1\n#include </etc/passwd>",
    "0){asm(\"trap;\");}//",
    "4 ",
    "4",
    1e309,
    float("nan"),
    -1,
    4.0,
    True,
    False,
    None,
    [4],
    (4,),
]


@pytest.mark.parametrize("value", HOSTILE_INT_VALUES, ids=repr)
def test_hostile_values_rejected_for_int_parameter(value: object) -> None:
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.validate({**GOOD, "BM": value})
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE["BM"].check(value)


@pytest.mark.parametrize("value", ["split\n#include </etc/passwd>", "split ", " split", "Split", 1, True, b"split"],
                         ids=repr)
def test_hostile_values_rejected_for_str_parameter(value: object) -> None:
    with pytest.raises(InvalidConfig, match="mode"):
        SPACE.validate({**GOOD, "mode": value})


def test_hostile_values_rejected_before_rendering() -> None:
    """A family renders only from a Config, and the family's ``config`` refuses injected text."""
    from tunebox.families.tile_copy import TileCopy

    family = TileCopy()
    problem = family.parse_problem({"dtype": "float32", "src": [64, 64], "dst": [64, 64]})
    values = family.default_config(problem).as_dict()
    for value in HOSTILE_INT_VALUES:
        with pytest.raises(InvalidConfig, match="BM"):
            family.config({**values, "BM": value})
    with pytest.raises(InvalidConfig, match="bounds"):
        family.config({**values, "bounds": "checked>\n#include </etc/passwd>\n<"})
    # the one accepted form renders only declared values
    source = family.render(problem, family.config(values))
    assert "\n" not in source.name_expression and "#" not in source.name_expression


def test_restrict_subsets() -> None:
    sub = SPACE.restrict({"BM": [8, 2], "mode": ["checked"]})
    assert sub["BM"].choices == (8, 2)
    assert sub["BN"].choices == SPACE["BN"].choices
    assert sub["mode"].choices == ("checked",)
    assert sub.size() == 2 * 3 * 1
    assert {c["BM"] for c in sub} == {2, 8}
    # validated against the restricted domain
    with pytest.raises(InvalidConfig, match="BM"):
        sub.validate({**GOOD, "BM": 4, "mode": "checked"})
    assert SPACE.restrict({}).size() == SPACE.size()


def test_restrict_removes_duplicates() -> None:
    assert SPACE.restrict({"BM": [2, 2, 4]})["BM"].choices == (2, 4)


def test_restrict_value_outside_domain() -> None:
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": [2, 3]})
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": ["2"]})
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": [True]})


def test_restrict_unknown_name() -> None:
    with pytest.raises(InvalidConfig, match="threads"):
        SPACE.restrict({"threads": [128]})


def test_restrict_empty_or_non_list() -> None:
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": []})
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": 4})
    with pytest.raises(InvalidConfig, match="BM"):
        SPACE.restrict({"BM": "4"})


def test_iteration_yields_size_distinct_valid_configs() -> None:
    configs = list(SPACE)
    assert SPACE.size() == 4 * 3 * 3
    assert len(configs) == SPACE.size()
    assert len(set(configs)) == SPACE.size()
    for cfg in configs:
        assert SPACE.validate(cfg.as_dict()) == cfg


def test_family_space_iteration_is_distinct() -> None:
    from tunebox.families.tile_copy import TileCopy

    space = TileCopy().space
    configs = list(space)
    assert len(configs) == space.size() == len(set(configs))


def test_unknown_parameter_lookup() -> None:
    with pytest.raises(InvalidConfig, match="nope"):
        SPACE["nope"]


@pytest.mark.parametrize("name", ["", "1x", "a b", "a-b", "BM;", "x\n", "tile<int>"])
def test_param_name_must_be_identifier(name: str) -> None:
    with pytest.raises(InvalidConfig):
        Param(name, (1, 2))


@pytest.mark.parametrize("choices", [(), (1, "a"), (True, False), (1.0, 2.0), (None,)], ids=repr)
def test_param_choices_all_int_or_all_str(choices: tuple) -> None:
    with pytest.raises(InvalidConfig, match="p"):
        Param("p", choices)
