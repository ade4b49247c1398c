"""What a view that starts off the 16-byte grid does to a tile_copy kernel when nothing stops it (the
evidence behind ``tunebox.runtime.arrays.ALIGNMENT``):

    python scripts/misaligned_view.py

Launches the tuned float32 1001 x 777 transpose (``use="tunebox"``) on views 4 bytes into their
storage with the launcher's alignment check removed, then asks torch for one more result: on the H200
the kernel's vector accesses fault and the process's CUDA context is lost (``misaligned address``).
With the check (``tests/gpu/test_launch_gpu.py``) such a call is served the library call or refused.
Needs a GPU and torch.
"""

import torch

import tunebox.runtime.launch as launch_module

launch_module.misaligned = lambda described: ()  # the check removed: every address passes
launcher = launch_module.Launcher("results/winners.sqlite")
a = torch.randn(1001 * 777 + 1, device="cuda")[1:].view(1001, 777)
b = torch.empty(777 * 1001 + 1, device="cuda")[1:].view(777, 1001)
try:
    served = launcher("tile_copy", {"src": a, "dst": b}, use="tunebox", transpose=True)
    torch.cuda.synchronize()
    print("without the check: ran", served.config, "equal:", torch.equal(b, a.t()))
except Exception as exc:
    print("without the check:", type(exc).__name__, str(exc)[:300])
try:
    print("context after:", torch.zeros(4, device="cuda").sum().item())
except Exception as exc:
    print("context after:", type(exc).__name__, str(exc)[:200])
