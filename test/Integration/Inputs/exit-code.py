"""Runs the command given and prints its exit status after its output
("exit N"), always exiting 0: a lit test can then check the status."""
import subprocess
import sys

status = subprocess.call(sys.argv[1:])
sys.stdout.flush()
print(f"exit {status}")
