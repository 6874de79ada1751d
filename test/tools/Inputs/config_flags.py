"""One configuration surface: every option of the decode pipelines
(DecodePipelineOptions, as `mla-opt --help` lists it under a pipeline) is a
flag of mla-compile and of mla-run, with the same name. Options for one
pipeline or for testing only (stop-at, test-*) are not configuration.

Usage: config_flags.py MLA_OPT MLA_COMPILE MLA_RUN
Prints each missing flag; exits 1 if there is one."""
import re
import subprocess
import sys


def help_text(tool):
    return subprocess.run([tool, "--help-hidden"], capture_output=True,
                          text=True, check=True).stdout


def pipeline_options(text, pipeline):
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines)
                 if re.match(r"\s+--%s\s" % re.escape(pipeline), l))
    indent = len(lines[start]) - len(lines[start].lstrip())
    names = []
    for line in lines[start + 1:]:
        m = re.match(r"(\s+)--([\w-]+)", line)
        if not m:
            continue  # enum values of an option
        if len(m.group(1)) <= indent:
            break
        names.append(m.group(2))
    return names


def main():
    mla_opt, *tools = sys.argv[1:]
    text = help_text(mla_opt)
    options = set()
    for pipeline in ("mla-decode-to-gfx950", "mla-decode-to-emu",
                     "mla-decode-split-to-cpu"):
        options |= set(pipeline_options(text, pipeline))
    options = sorted(o for o in options
                     if o != "stop-at" and not o.startswith("test-"))
    if len(options) < 6:
        print("too few pipeline options found: %s" % options)
        return 1
    missing = 0
    for tool in tools:
        flags = set(re.findall(r"^\s+--([\w-]+)", help_text(tool), re.M))
        for option in options:
            if option not in flags:
                print("%s: no --%s" % (tool.rsplit("/", 1)[-1], option))
                missing += 1
    print("%d configuration options, in every tool" % len(options)
          if not missing else "%d missing" % missing)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
