"""The test-only faults family: every planted fault renders and compiles except the compile error."""

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.families import get
from tunebox.records import Status


def test_every_fault_compiles_except_the_planted_compile_error(tmp_path):
    family = get("faults")
    problem = family.parse_problem({"n": 1000})
    configs = list(family.space.restrict({"block": [256], "passes": [1]}))
    builder = NvrtcBuilder("sm_90", cache_dir=tmp_path)
    try:
        results = builder.build([family.render(problem, c) for c in configs])
    finally:
        builder.close()
    for config, result in zip(configs, results, strict=True):
        expected = Status.COMPILE_ERROR if config["fault"] == "compile_error" else Status.OK
        assert result.status is expected, (config.label(), result.log[-300:])
    assert all(not family.violations(problem, c) for c in configs)
