#!/usr/bin/env python3
"""Prints where `make test`'s time went, from Swift Testing's xUnit output: each suite's tests, the
sum of their durations and its longest test (suites by that sum, largest first), then the ten
slowest tests. Tests run in parallel, so a test's duration includes the time it waited for a core."""
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        print(f"suite-times: no xUnit results at {path} ({error})")
        return
    cases = []
    for case in root.iter("testcase"):
        cases.append((float(case.get("time", "0")), case.get("classname", "?"), case.get("name", "?"),
                      case.find("failure") is not None))
    suites = defaultdict(list)
    for seconds, suite, name, failed in cases:
        suites[suite].append(seconds)
    print(f"\n{len(cases)} tests in {len(suites)} suites; by suite (sum of test durations, longest test):")
    for suite, times in sorted(suites.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(times):8.1f} s  {max(times):7.1f} s  {len(times):3d} tests  {suite}")
    print("the ten slowest tests:")
    for seconds, suite, name, failed in sorted(cases, reverse=True)[:10]:
        print(f"  {seconds:8.1f} s  {suite}.{name}{'  (FAILED)' if failed else ''}")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".build/test-results-swift-testing.xml")
