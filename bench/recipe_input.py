#!/usr/bin/env python3
"""A recipe's input plan from a generated program (bench/gen_published.py):
the program and its training kept, the mesh the recipe's, every decision
left to the strategy that `plan search --strategy S` runs on it. With a
`pp` axis, a pipeline cut as evenly as the layers go (the rest first; the
embedding on the first stage, the final norm, head and loss on the last),
1F1B, with MICROBATCHES (default 2 a stage).

usage: recipe_input.py PROGRAM MESH LAYERS OUT [MICROBATCHES]
  MESH: "pp=8,fsdp=8,tp=8" (mesh order as written)
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "scripts"))
import gen_models as gm  # noqa: E402


def main():
    src, mesh, layers, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    axes = [kv.split("=") for kv in mesh.split(",")]
    sections, cur = {}, None
    for line in open(src).read().splitlines(True):
        m = re.match(r"^([\w-]+):", line)
        if m:
            cur = m.group(1)
            sections[cur] = []
        if cur:
            sections[cur].append(line)
    text = "".join(sections["libplan"] + sections["program"])
    text += "mesh:\n  axes: [%s]\n  devices_per_host: 8\n" % ", ".join(
        "%s=%s" % (k, v) for k, v in axes)
    text += "".join(sections["training"])
    sizes = dict(axes)
    if "pp" in sizes:
        pp = int(sizes["pp"])
        mb = int(sys.argv[5]) if len(sys.argv) > 5 else 2 * pp
        text += "\n".join(gm.pipeline_lines(layers, pp, mb)) + "\n"
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
