"""Feeds every prefix (in steps) of an IR file to a tool and fails unless each
run ends with a diagnostic and an exit code of 1..127 (no crash, no success)."""
import subprocess
import sys
import tempfile

tool, path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path, encoding="utf-8").read()
# The function body starts after the leading comment; cut inside the IR only.
start = text.index("func.func")
bad = 0
with tempfile.TemporaryDirectory() as tmp:
    for n in range(start + 1, len(text) - 3, step):
        f = f"{tmp}/cut.mlir"
        open(f, "w", encoding="utf-8").write(text[:n])
        r = subprocess.run([tool, f], capture_output=True, text=True)
        if not (0 < r.returncode < 128) or "error:" not in r.stderr:
            print(f"prefix of {n} bytes: exit {r.returncode}\n{r.stderr}")
            bad += 1
print(f"checked prefixes, {bad} bad")
sys.exit(1 if bad else 0)
