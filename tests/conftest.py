import pytest

from tunebox.runner.probe import gpu_status


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where the probe initialises the driver and finds a device."""
    if not any("gpu" in item.keywords for item in items):
        return
    available, reason = gpu_status()
    if available:
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA device: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
