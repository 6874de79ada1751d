"""Lists chip facts spelled outside the target table.

Every chip fact (names, LDS bytes, register file) lives in
lib/Target/KnownTargets.cpp; the sources under lib/, include/, runtime/ and
tools/ read it from there (comments may name chips). Prints each offending
line and exits 1.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
table = root / "lib" / "Target" / "KnownTargets.cpp"
# Chip names in quotes, and the LDS sizes of the chips spelled out.
pattern = re.compile(r'"(gfx[0-9]{3,4}[a-z]?|mi[0-9]{3}x?|sm_[0-9]{2,3}a?|[hb][1-9]00)"'
                     r'|\b163840\b|160 \* 1024|\b49152\b|48 \* 1024|228 \* 1024')
found = False
for folder in ("lib", "include", "runtime", "tools"):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".cpp", ".h", ".c") or path == table:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = re.sub(r"/\*.*?\*/", "", re.sub(r"//.*", "", line))
            if pattern.search(code):
                print(f"{path.relative_to(root)}:{number}: {line.strip()}")
                found = True
sys.exit(1 if found else 0)
