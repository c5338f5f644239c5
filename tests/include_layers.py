#!/usr/bin/env python3
"""The floors of the house, checked from the sources (MODEL.md §3, §7):

* every quoted include names its folder from the repository root and exists;
* advisor/core includes only advisor/core: the vocabulary knows no model;
* engine/runtime includes only engine/runtime and advisor/core;
* engine/ includes from advisor/ only core and the model's public API;
* measure/ includes from advisor/ only core, the model and calibration, and
  from engine/ only engine/runtime, what runs an engine step (train.hpp)
  and the GPU kernels it times alone (cuda/kernels.hpp, adamw.hpp's step);
* no citation of a document outside the repository, and every
  "MODEL.md §N" names a heading of advisor/MODEL.md.

Prints each breach and exits 1 if there is one."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
generated = {"engine/version.hpp"}  # vcs_tag's, in the build tree
sources = [p for d in ("advisor", "engine", "measure", "tests") for p in (root / d).rglob("*")
           if p.suffix in {".cpp", ".hpp", ".cu", ".cuh"} and p.is_file()]

rules = [  # (folder of the including file, allowed prefixes for advisor/ and engine/ includes)
    ("advisor/core/", ("advisor/core/",)),
    ("engine/runtime/", ("advisor/core/", "engine/runtime/")),
    ("engine/", ("advisor/core/", "advisor/model/", "engine/")),
    ("measure/", ("advisor/core/", "advisor/model/", "advisor/calibration/", "engine/runtime/",
                  "engine/train.hpp", "engine/cuda/kernels.hpp", "engine/adamw.hpp", "measure/")),
]
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
breaches = []
for path in sources:
    rel = path.relative_to(root).as_posix()
    text = path.read_text(errors="replace")
    for name in include.findall(text):
        if not (root / name).is_file() and name not in generated:
            breaches.append(f"{rel}: #include \"{name}\" does not name a file from the repository root")
            continue
        for folder, allowed in rules:
            if rel.startswith(folder):
                if name.startswith(("advisor/", "engine/")) and not name.startswith(allowed):
                    breaches.append(f"{rel}: includes {name}, outside what {folder} may use")
                break

headings = set(re.findall(r"^## (§\d+)", (root / "advisor/MODEL.md").read_text(), re.M))
for path in root.rglob("*"):
    if not path.is_file() or any(part in {".git"} or part.startswith("build") for part in path.relative_to(root).parts):
        continue
    if path.suffix not in {".cpp", ".hpp", ".cu", ".cuh", ".md", ".sh", ".py", ".build", ".txt"}:
        continue
    text = path.read_text(errors="replace")
    rel = path.relative_to(root).as_posix()
    outside = "DESIGN" + " §"  # spelled apart so this file does not cite it
    if outside in text:
        breaches.append(f"{rel}: cites {outside}, which is not in the repository (cite MODEL.md)")
    for sec in set(re.findall(r"MODEL\.md (§\d+)", text)):
        if sec not in headings:
            breaches.append(f"{rel}: cites MODEL.md {sec}, which has no heading")

for b in breaches:
    print(b)
print(f"{len(sources)} sources, {len(headings)} MODEL.md sections: {len(breaches)} breaches")
sys.exit(1 if breaches else 0)
