"""The Python binding against an installed prefix (tests/install/run.sh).

Prints `hash H` (the plan hash of argv[1]), one `library PATH` line per
libplan library the process mapped, and `verify EQUAL`, `verify NOT
EQUAL` or `verify none: REASON` when the library loaded has no verifier.
"""

import os
import sys

import libplan

plan = libplan.load(sys.argv[1])
print("hash", plan.hash())
with open("/proc/self/maps") as f:
    libs = sorted({p for p in (line.split()[-1] for line in f)
                   if os.path.basename(p).startswith("libplan")
                   and ".so" in p})
for lib in libs:
    print("library", lib)
try:
    print("verify", "EQUAL" if plan.verify().equal else "NOT EQUAL")
except libplan.UnsupportedError as e:
    print("verify none:", e)
