"""examples/python runs as its docstring says and passes its check."""

import os
import pathlib
import subprocess
import sys


def test_decode_emu_example(artifacts):
    root = pathlib.Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / "examples/python/decode_emu.py"),
         str(artifacts["bf16"])],
        capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert "max |out - reference|" in result.stdout
