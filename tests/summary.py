#!/usr/bin/env python3
"""Counts the results in meson test logs and prints `N passed, N failed, N skipped`.

Usage: summary.py [--expect SUITE,SUITE...] LOG[=STATUS] [LOG[=STATUS] ...]

With --expect, a suite that ran no test counts as a failure and is named:
a part that was not built must not pass for a green suite. A log given with
the exit status of the step that wrote it counts one failure more when the
step failed but none of its tests did (a build error, a sanitizer report
outside a test).
"""
import json
import sys


def main(argv):
    expect = []
    if len(argv) > 1 and argv[0] == "--expect":
        expect = [s for s in argv[1].split(",") if s]
        argv = argv[2:]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    suites = set()
    for arg in argv:
        path, _, status = arg.partition("=")
        failed_before = counts["failed"]
        try:
            lines = open(path).read().splitlines()
        except OSError as e:
            print(f"no test log {path}: {e.strerror} (the build or the test setup failed)")
            counts["failed"] += 1
            continue
        for line in lines:
            if not line.strip():
                continue
            r = json.loads(line)
            # "project:suite / name"
            suites.add(r["name"].split(" / ")[0].split(":")[-1])
            if r["result"] in ("OK", "EXPECTEDFAIL"):
                counts["passed"] += 1
            elif r["result"] == "SKIP":
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
        if status not in ("", "0") and counts["failed"] == failed_before:
            print(f"{path}: its step failed (exit {status}) with no failed test in it")
            counts["failed"] += 1
    missing = [s for s in expect if s not in suites]
    if missing:
        print(f"suites that ran no test: {', '.join(missing)} (not built? see the 'Parts built' summary of meson setup)")
        counts["failed"] += len(missing)
    print(f'{counts["passed"]} passed, {counts["failed"]} failed, {counts["skipped"]} skipped')
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
