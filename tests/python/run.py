"""Runs tests/python/test_*.py: with pytest when it is installed (the test
command installs it), else with the standard library's unittest (the tests
are unittest cases, which pytest runs too). Either way the count of tests
passed is printed and, apart, the tests skipped with their reasons (skips
are not passes). Exit status 1 when any test fails.

    python3 tests/python/run.py [-v] [--unittest]
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.path.insert(0, HERE)
    if "--unittest" not in sys.argv[1:]:
        try:
            import pytest
        except ImportError:
            pytest = None
        if pytest is not None:
            args = [HERE, "-q", "-rs", "-p", "no:cacheprovider"]
            if "-v" in sys.argv[1:]:
                args.append("-v")
            return 0 if pytest.main(args) == 0 else 1
    verbosity = 2 if "-v" in sys.argv[1:] else 1
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py",
                                                top_level_dir=HERE)
    t0 = time.monotonic()
    result = unittest.TextTestRunner(verbosity=verbosity,
                                     stream=sys.stderr).run(suite)
    dt = time.monotonic() - t0
    bad = len(result.failures) + len(result.errors) + \
        len(result.unexpectedSuccesses)
    passed = result.testsRun - bad - len(result.skipped) - \
        len(result.expectedFailures)
    reasons = {}
    for _, why in result.skipped:
        reasons[why] = reasons.get(why, 0) + 1
    print("python: %d passed, %d failed, %d skipped in %.1f s"
          % (passed, bad, len(result.skipped), dt))
    for why, n in sorted(reasons.items()):
        print("  skipped %d: %s" % (n, why))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
