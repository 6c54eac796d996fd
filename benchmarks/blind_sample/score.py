"""Score amp-lint on the blind sample: recall on the labels made before it ran, precision over
its reports.

    python benchmarks/blind_sample/score.py RUNS [--labels benchmarks/blind_sample/labels.tsv]

RUNS holds one ``OWNER__NAME.json`` per repository: amp-lint's ``--format json`` output of
``python -m linter . --select ALL --extend-select AMP015 --format json --no-cache`` run from the
repository's root at the commit `repositories.tsv` pins (see README.md). A positive is found when
its rule reports in the same file within 3 lines (BLIND-SAMPLE.md's matching).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Lines apart a report may be from a label and still match it.
SLACK = 3


def _labels(path: Path) -> list[dict[str, Any]]:
    with path.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    for row in rows:
        row["line"] = int(row["line"])
    return rows


def _reports(runs: Path, repo: str) -> list[dict[str, Any]] | None:
    path = runs / f"{repo.replace('/', '__')}.json"
    if not path.exists():
        return None
    found: list[dict[str, Any]] = json.loads(path.read_text())
    return found


def _matches(report: dict[str, Any], row: dict[str, Any]) -> bool:
    line = (report.get("location") or {}).get("row")
    return (
        report.get("code") == row["rule"]
        and report.get("filename") == row["path"]
        and line is not None
        and abs(line - row["line"]) <= SLACK
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="folder of OWNER__NAME.json outputs")
    parser.add_argument("--labels", type=Path, default=HERE / "labels.tsv")
    args = parser.parse_args()
    labels = _labels(args.labels)
    by_repo: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in labels:
        by_repo[row["repo"]].append(row)
    found: collections.Counter[str] = collections.Counter()
    positives: collections.Counter[str] = collections.Counter()
    verdicts: collections.Counter[str] = collections.Counter()
    failures = 0
    missing = []
    for repo, rows in sorted(by_repo.items()):
        reports = _reports(args.runs, repo)
        if reports is None:
            missing.append(repo)
            continue
        failures += sum(1 for report in reports if report.get("code") is None)
        for row in rows:
            if row["after"] == "0" and row["label"] == "positive" and row["rule"] != "AMP004":
                positives[row["rule"]] += 1
                if any(_matches(report, row) for report in reports):
                    found[row["rule"]] += 1
        for report in reports:
            if report.get("code") in (None, "AMP004"):
                continue
            labelled = {row["label"] for row in rows if _matches(report, row)}
            verdict = next(
                (v for v in ("positive", "negative", "debatable") if v in labelled), "unlabelled"
            )
            verdicts[verdict] += 1
    total, hits = sum(positives.values()), sum(found.values())
    core = [rule for rule in positives if rule != "AMP015"]
    core_total, core_hits = sum(positives[r] for r in core), sum(found[r] for r in core)
    print(f"repositories: {len(by_repo) - len(missing)} scored, {len(missing)} without a run")
    print(f"recall, before-labels without AMP004: {hits}/{total} = {hits / max(total, 1):.0%}")
    print(f"  ...and without AMP015 (off by default): {core_hits}/{core_total}")
    for rule in sorted(positives):
        print(f"  {rule}: {found[rule]}/{positives[rule]}")
    right, wrong = verdicts["positive"], verdicts["negative"]
    print(
        f"reports other than AMP004: {sum(verdicts.values())} ({dict(verdicts)}); "
        f"precision {right}/{right + wrong} = {right / max(right + wrong, 1):.1%}"
    )
    print(f"files a rule failed on: {failures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
