"""The Tricks-or-Traps claims table from the results of the five `studies/tricks_or_traps*.py`
studies: Markdown and CSV in reports/tricks_or_traps/, and the Markdown on stdout.

    .venv/bin/python tools/tricks_report.py [--results results] [--out reports/tricks_or_traps]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ablate.report.claims.paper import FINDINGS, claims_table, tricks_claims
from ablate.report.data.load import load_study_data
from ablate.study import load_study

STUDIES = Path(__file__).resolve().parent.parent / "studies"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="reports/tricks_or_traps")
    args = parser.parse_args()
    data = {}
    for name in dict.fromkeys(f.study for f in FINDINGS):
        study = load_study(STUDIES / f"{name}.py")
        loaded = load_study_data(study, args.results)
        data[name] = loaded if loaded.complete().shape[0] else None
    table = claims_table(tricks_claims(data))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "claims.csv", index=False)
    heads = list(table.columns)
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.to_numpy()]
    markdown = "\n".join(lines)
    (out / "claims.md").write_text(markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
