import os
import pathlib

import pytest


@pytest.fixture(scope="session")
def artifacts():
    """The example artifacts the build compiled (python/CMakeLists.txt)."""
    folder = pathlib.Path(os.environ.get("MLA_TEST_ARTIFACTS", ""))
    paths = {f: folder / f"decode_{f}.mla" for f in ("bf16", "fp8", "mxfp4")}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        pytest.fail(f"artifacts missing (build first): {missing}")
    return paths
