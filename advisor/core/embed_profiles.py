#!/usr/bin/env python3
"""Compiles profiles/*.json into the advisor so bundled machines need no files."""
import pathlib
import sys

out = pathlib.Path(sys.argv[1])
default = sys.argv[2]
files = sorted((pathlib.Path(p) for p in sys.argv[3:]), key=lambda p: (p.stem != default, p.stem))
lines = ['#include "advisor/core/bundled_profiles.hpp"', "namespace ff {", "const std::vector<BundledProfile>& bundled_profiles() {",
         "  static const std::vector<BundledProfile> all = {"]
for f in files:
    text = f.read_text()
    if ")json\"" in text:
        sys.exit(f"{f}: contains the raw-string delimiter )json\"")
    lines.append(f'    {{"{f.stem}", R"json({text})json"}},')
lines += ["  };", "  return all;", "}", "}  // namespace ff", ""]
tmp = out.with_suffix(".tmp")
tmp.write_text("\n".join(lines))
tmp.replace(out)
