"""Family ``faults`` (test-only): variants that misbehave on purpose.

A copy of ``n`` 32-bit words repeated ``passes`` times (so good variants differ in speed), whose
``fault`` parameter plants one misbehaviour: an out-of-bounds write (sticky ``runtime_error``), an
endless loop (``timeout``), a wrong value, an element never written or a modified input
(``wrong_result``), more shared memory than the device has or a launch above the kernel's launch
bounds (``resource_error``), a compile error, or one that only compute-sanitizer sees (the outputs
verify): a shared-memory race (racecheck) or a read one element past the end of the input
(memcheck). Every variant passes the validity rules: the faults must be caught by the harness, not
by the rules.
"""

from ..contract import Family
from .operation import FaultsOperation, FaultsProblem
from .planted import EXPECTED_STATUS, FAULTS, SANITIZER_FINDS, PlantedConfig, PlantedTemplate

FAMILY = Family(FaultsOperation(), (PlantedTemplate(),))

__all__ = ["EXPECTED_STATUS", "FAMILY", "FAULTS", "SANITIZER_FINDS", "FaultsProblem", "PlantedConfig"]
