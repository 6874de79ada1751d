"""Writes a small .npy file without NumPy: npy.py PATH DTYPE SHAPE [VALUES].

DTYPE is a NumPy dtype string such as <i4, <f4, |u1; SHAPE is comma separated
(empty for a scalar); VALUES are comma separated and repeated to fill the
shape (default 0).
"""
import struct
import sys

path, dtype, shape = sys.argv[1], sys.argv[2], sys.argv[3]
dims = [int(d) for d in shape.split(",") if d]
values = sys.argv[4].split(",") if len(sys.argv) > 4 else ["0"]
count = 1
for d in dims:
    count *= d
fmt = {"i4": "i", "f4": "f", "u1": "B", "u2": "H", "f8": "d", "i8": "q"}[dtype[1:]]
conv = float if fmt in "fd" else int
data = b"".join(struct.pack("<" + fmt, conv(values[i % len(values)])) for i in range(count))
shape_str = "(" + "".join(f"{d}, " for d in dims).rstrip(" ")
shape_str = shape_str[:-1] + ")" if len(dims) > 1 else shape_str + ")"
header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape_str}, }}"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
