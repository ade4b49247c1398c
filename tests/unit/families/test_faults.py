"""The test-only faults family: every planted fault renders and compiles except the compile error
(the ones only compute-sanitizer sees included)."""

import family_checks

from tunebox.families import get
from tunebox.families.faults import EXPECTED_STATUS, SANITIZER_FINDS
from tunebox.records import Status


def test_every_fault_compiles_except_the_planted_compile_error(tmp_path):
    family = get("faults")
    problem = family.parse_problem({"n": 1000})
    configs = list(family.space.restrict({"block": [256], "passes": [1]}))
    compiled = family_checks.compile_cases(family, [(problem, c) for c in configs], cache_dir=tmp_path)
    for (_, config), result in compiled:
        expected = Status.COMPILE_ERROR if config["fault"] == "compile_error" else Status.OK
        assert result.status is expected, (config.label(), result.log[-300:])
    assert all(not family.violations(problem, c) for c in configs)
    planted = {config["fault"]: result.status for (_, config), result in compiled}
    assert {fault: planted[fault] for fault in SANITIZER_FINDS} == {"smem_race": Status.OK, "oob_read": Status.OK}
    assert all(EXPECTED_STATUS[fault] == "ok" for fault in SANITIZER_FINDS)  # verification cannot see them
