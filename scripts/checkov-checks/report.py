"""Summarise a checkov JSON report for scripts/check-infra; exit 1 on any failed
check, on an empty scan, or (with --expect-*) on other counts than expected.

    python report.py REPORT.json [--expect-failed N --expect-passed N]
"""

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--expect-failed", type=int)
    parser.add_argument("--expect-passed", type=int)
    args = parser.parse_args()

    text = open(args.report).read()
    try:
        reports = json.loads(text)
    except json.JSONDecodeError:
        print(f"error: checkov gave no JSON report:\n{text[-2000:]}", file=sys.stderr)
        return 1
    # One framework: an object; several: a list. A scan that found nothing to
    # check gives a bare summary without check_type.
    reports = reports if isinstance(reports, list) else [reports]
    expecting = args.expect_failed is not None or args.expect_passed is not None
    label = "caught" if expecting else "FAILED"
    failed = passed = 0
    for report in reports:
        summary = report.get("summary", {})
        failed += summary.get("failed", 0)
        passed += summary.get("passed", 0)
        print(f"    {report.get('check_type', 'nothing scanned')}: {summary.get('passed', 0)} passed, "
              f"{summary.get('failed', 0)} failed, {summary.get('skipped', 0)} skipped (inline, with a reason)")
        for check in report.get("results", {}).get("failed_checks", []):
            print(f"    {label} {check['check_id']}: {check['check_name']}\n"
                  f"           {check['resource']} ({check['file_path']} lines {check['file_line_range']})")

    if expecting:
        if (failed, passed) != (args.expect_failed, args.expect_passed):
            print(f"error: expected {args.expect_failed} failed and {args.expect_passed} passed, "
                  f"got {failed} and {passed}: the check is broken or was not loaded", file=sys.stderr)
            return 1
        return 0
    if passed + failed == 0:
        print("error: checkov checked nothing", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
