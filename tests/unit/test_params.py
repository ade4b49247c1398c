"""Param / Space / Config: complete validated assignments, hostile values, restriction, iteration."""

from __future__ import annotations

import pytest

from tunebox.errors import InvalidConfig
from tunebox.params import Config, Param, Space

SPACE = Space(
    (
        Param("BM", (1, 2, 4, 8), "rows"),
        Param("BN", (32, 64, 128), "cols"),
        Param("mode", ("checked", "split", "unchecked"), "bounds"),
    )
)
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
    '0){asm("trap;");}//',
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


@pytest.mark.parametrize(
    "value", ["split\n#include </etc/passwd>", "split ", " split", "Split", 1, True, b"split"], ids=repr
)
def test_hostile_values_rejected_for_str_parameter(value: object) -> None:
    with pytest.raises(InvalidConfig, match="mode"):
        SPACE.validate({**GOOD, "mode": value})


def test_hostile_values_rejected_before_rendering() -> None:
    """A family renders only from a Config, and the family's ``config`` refuses injected text."""
    from tunebox.families import get

    family = get("tile_copy")
    problem = family.parse_problem({"dtype": "float32", "src": [64, 64], "dst": [64, 64]})
    values = family.default_config(problem).as_dict()
    for value in HOSTILE_INT_VALUES:
        with pytest.raises(InvalidConfig, match="BM"):
            family.config({**values, "BM": value})
    with pytest.raises(InvalidConfig, match="bounds"):
        family.config({**values, "bounds": "checked>\n#include </etc/passwd>\n<"})
    with pytest.raises(InvalidConfig, match="unknown template"):
        family.config({**values, "template": "vector>\n#include </etc/passwd>\n<"})
    # the one accepted form renders only declared values, into the named configuration struct
    source = family.render(problem, family.config(values))
    assert "\n" not in source.name_expression and "#" not in source.name_expression
    assert source.code.rstrip().endswith("};") and "passwd" not in source.code


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
    from tunebox.families import get

    space = get("tile_copy").space
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


# -- the conditional space ------------------------------------------------------------------------
from tunebox.params import TEMPLATE, TemplateSpaces  # noqa: E402

SPACES = TemplateSpaces(
    (
        ("vector", Space((Param("BM", (1, 2, 4)), Param("vec", (4, 8))))),
        ("ring", Space((Param("BM", (1, 2, 4)), Param("stages", (2, 3))))),
    )
)


def test_a_configuration_names_its_template_and_holds_only_its_parameters() -> None:
    config = SPACES.validate({TEMPLATE: "ring", "BM": 2, "stages": 3})
    assert config.as_dict() == {"BM": 2, "stages": 3, TEMPLATE: "ring"}
    with pytest.raises(InvalidConfig, match="unknown parameter"):
        SPACES.validate({TEMPLATE: "ring", "BM": 2, "stages": 3, "vec": 4})  # vector's parameter
    with pytest.raises(InvalidConfig, match="names its template"):
        SPACES.validate({"BM": 2, "stages": 3})
    with pytest.raises(InvalidConfig, match="unknown template"):
        SPACES.validate({TEMPLATE: "tma", "BM": 2})
    assert SPACES.holds({TEMPLATE: "vector", "BM": 4, "vec": 8})
    assert not SPACES.holds({TEMPLATE: "vector", "BM": 4, "vec": 8, "stages": 2})
    assert not SPACES.holds({"BM": 4, "vec": 8})


def test_the_conditional_space_has_no_combination_of_unrelated_parameters() -> None:
    configs = list(SPACES)
    assert SPACES.size() == len(configs) == 3 * 2 + 3 * 2
    assert all(("stages" in c.as_dict()) == (c[TEMPLATE] == "ring") for c in configs)


def test_restrict_keeps_templates_shared_and_per_template_lists() -> None:
    sliced = SPACES.restrict({TEMPLATE: ["ring"], "BM": [1, 4], "ring": {"stages": [3]}})
    assert sliced.names() == ("ring",)
    assert [c.as_dict() for c in sliced] == [
        {"BM": 1, "stages": 3, TEMPLATE: "ring"},
        {"BM": 4, "stages": 3, TEMPLATE: "ring"},
    ]
    both = SPACES.restrict({"BM": [2]})
    assert both.size() == 2 + 2
    with pytest.raises(InvalidConfig, match="no kept template has a parameter 'vec'"):
        SPACES.restrict({TEMPLATE: ["ring"], "vec": [4]})
    with pytest.raises(InvalidConfig, match="not a kept template"):
        SPACES.restrict({TEMPLATE: ["ring"], "vector": {"vec": [4]}})
    with pytest.raises(InvalidConfig, match="outside its domain"):
        SPACES.restrict({"ring": {"stages": [5]}})
    with pytest.raises(InvalidConfig, match="non-empty list"):
        SPACES.restrict({TEMPLATE: []})


def test_no_template_parameter_may_be_called_template() -> None:
    with pytest.raises(InvalidConfig, match="no parameter may be called"):
        TemplateSpaces((("t", Space((Param(TEMPLATE, (1, 2)),))),))
