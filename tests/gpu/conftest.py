import pytest

from tunebox.build.nvrtc import NvrtcBuilder
from tunebox.runner.gpu_runner import GpuRunner


@pytest.fixture(scope="session")
def runner():
    r = GpuRunner(job_timeout_s=60)
    r.start()
    yield r
    r.close()


@pytest.fixture(scope="session")
def builder(tmp_path_factory):
    b = NvrtcBuilder("sm_90", cache_dir=tmp_path_factory.mktemp("cubins"))
    yield b
    b.close()
