"""`ablate report STUDY...`: statistics, claims, tables and figures of a study, read from its
results store; of several studies, each one's report and their paper findings tested together."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    studies: list[Path] = typer.Argument(
        ..., help="study files (studies/x.py) or modules (studies.x); several: a reproduction"
    ),
    results: Path = typer.Option(Path("results"), help="results folder holding mlflow.db"),
    out: Path = typer.Option(Path("reports"), help="reports are written to OUT/<study>/"),
    tracking_uri: str | None = typer.Option(
        None, help="results store: an MLflow URI or jsonl:///abs/dir (default RESULTS/mlflow.db)"
    ),
    curve_axis: str | None = typer.Option(
        None,
        help="The learning curves' x axis: step, generated_tokens, trained_tokens, model_flops "
        "or wall_seconds (default: the compute curves' axis, else step).",
    ),
    paper: bool = typer.Option(
        False,
        "--paper",
        help="Also write OUT/<study>/paper.tex, a two-column article (results, forest plot, "
        "headline table, appendix), and compile it to paper.pdf where pdflatex is installed.",
    ),
) -> None:
    """Write reports/<study>/ (report.md, report.html, tables/, figures/) for each study and
    attach it to the study's parent run in the results store. When the studies declare a
    paper's findings (`Study(findings=...)`), test them together on the studies' results and
    write the reproduction beside them: OUT/report.md, OUT/report.html, OUT/tables/claims.*.
    Among several studies, one without runs is skipped and its findings reported as untested."""
    from rich.console import Console

    from ablate import tracking
    from ablate.base.errors import StudyError
    from ablate.report.render.build import report_study
    from ablate.report.render.multiples import check_axis
    from ablate.report.render.reproduction import write_reproduction
    from ablate.study.preflight import check_output_dir
    from ablate.study.store_failures import read_errors

    console = Console()
    check_axis(curve_axis)
    loaded = _load_all(studies)
    for study in loaded.values():  # before reading anything: a bad --out costs one line
        check_output_dir(out / study.name)
    data, failed = {}, []
    for path, study in loaded.items():
        with read_errors(tracking_uri or tracking.default_uri(results)):
            uri = _checked_uri(results, study.name, path, tracking_uri, alone=len(loaded) == 1)
            if uri is None:
                data[study.name] = None
                continue
            data[study.name] = report_study(study, results, out, uri, curve_axis, paper)
        folder = out / study.name
        console.print(f"report written to {folder / 'report.md'} and {folder / 'report.html'}")
        if paper:
            failed += _print_compiled(console, folder / "paper.tex")
    if all(d is None for d in data.values()):
        raise StudyError(f"no study has a finished run in {results}: run them first")
    findings = [f for study in loaded.values() for f in study.findings]
    if findings:
        folder = write_reproduction(findings, data, out)
        console.print(f"reproduction ({len(findings)} findings) written to {folder / 'report.md'}")
    _exit_if_failed(failed)


def _exit_if_failed(failed: list[str]) -> None:
    """Exit 1 on the first paper that did not compile (after every report is written): a
    paper that does not compile is not an export."""
    if failed:
        typer.secho(f"error: {failed[0]}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)


def _print_compiled(console, tex: Path) -> list[str]:
    """Compile `tex`, print its line, and return it as a failure ([] when it compiled)."""
    line, compiled = _compiled(tex)
    console.print(line)
    return [] if compiled else [line]


def _compiled(tex: Path) -> tuple[str, bool]:
    """One line on the paper export (where it is, what pdflatex made of it) and whether it did
    not fail to compile (no pdflatex is not a failure: the .tex is the export)."""
    from ablate.report.render.paper_document import compile_pdf

    done = compile_pdf(tex)
    if done is None:
        line = f"paper written to {tex}; pdflatex not found (`make test-latex` installs TeX Live)"
        return line, True
    if done.pdf is None:
        log = tex.with_suffix(".log")
        return f"paper written to {tex}; pdflatex failed: {done.error} (see {log})", False
    boxes = f"{len(done.overfull)} overfull box" + "es" * (len(done.overfull) != 1)
    return f"paper written to {tex} and {done.pdf} ({done.pages} pages, {boxes})", True


def _load_all(paths: list[Path]) -> dict:
    """path -> Study; studies named twice, or a finding id declared by two of them, are an
    error: each study and finding is one row of a reproduction."""
    from ablate.base.errors import StudyError
    from ablate.study.study import load_study

    loaded = {path: load_study(path) for path in paths}
    names = [study.name for study in loaded.values()]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise StudyError(f"study {twice!r} is given twice")
    declared: dict[str, str] = {}
    for study in loaded.values():
        for f in study.findings:
            if f.id in declared:
                raise StudyError(
                    f"finding {f.id!r} is declared by studies {declared[f.id]!r} and "
                    f"{study.name!r}: give one of them another id"
                )
            declared[f.id] = study.name
    return loaded


def _checked_uri(
    results: Path, name: str, study: Path, tracking_uri: str | None, *, alone: bool
) -> str | None:
    """The study's store, checked to hold a finished run of it; among several studies, one
    that has none is skipped (None) and said so, unless no study has any."""
    from rich.console import Console

    from ablate import tracking
    from ablate.base.errors import StudyError

    uri = tracking_uri or tracking.default_uri(results)
    try:
        _require_finished_runs(tracking.open_store(uri), name, study, results)
    except StudyError as exc:
        if alone:
            raise
        Console(stderr=True).print(f"skipped: {exc}", markup=False)
        return None
    return uri


def _require_finished_runs(store, name: str, study: Path, results: Path) -> None:
    from ablate.base.errors import StudyError

    if not store.exists():  # reading a missing store would create it, for nothing to show
        raise StudyError(
            f"no runs of study {name!r} in {results} (no {store.kind} at {store.uri}): run it "
            f"first (ablate run {study} --results {results})"
        )
    runs = store.runs(name).runs
    uri = store.uri
    if runs.empty:
        raise StudyError(f"no runs of study {name!r} in {uri}: run it first (ablate run {study})")
    if not (runs["status"] == "FINISHED").any():
        states = ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())
        raise StudyError(
            f"study {name!r} has no finished trial in {uri} ({states}): finish it first "
            f"(ablate run {study})"
        )
