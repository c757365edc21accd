"""Where the test suite's time goes: every test's duration, the kind of work it does, and the Python processes it
starts, from one real run of pytest.

    python bench/suite_profile.py --label default                        # the README's test command
    python bench/suite_profile.py --label integration -- -m integration  # any pytest arguments after --

It runs ``python -m pytest`` with the given arguments (``-n`` and markers included) and two probes:

- a pytest plugin (this module, loaded with ``-p suite_profile`` in pytest and in every xdist worker) that records
  each test's setup, call and teardown seconds and, while the test runs, the Lightning fits, search loops and
  non-Python programs it starts in-process;
- a line in a ``.pth`` file of this environment's site-packages (present only while the suite runs) that records
  every Python interpreter of this environment started meanwhile, with its command line and the test that was
  running (pytest's ``PYTEST_CURRENT_TEST``, which children inherit). An interpreter started with an environment
  that drops ``FAIRNAS_SUITE_PROFILE_DIR`` is not seen.

A test's kind is the first that applies: ``install`` (it ran pip), ``browser`` (Chromium), ``slurm`` (SLURM or
munge daemons or clients), ``search`` (a search loop in-process, or a search.py / study.py process), ``training`` (a
Lightning fit in-process, or a train.py / compare.py process), ``subprocess`` (any other Python process), ``unit``.

Writes ``tests.csv`` (one row per test), ``summary.md`` (wall time, processes, seconds by kind and by module, the
slowest tests) and ``manifest.json`` (the command, commit, machine) into ``results/test_suite_profile/<label>/`` (or
``--output``) and prints the summary. A shared fixture's set-up is charged to the first test that uses it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.evidence import results

REPOSITORY = Path(__file__).resolve().parent.parent
RECORDS = "FAIRNAS_SUITE_PROFILE_DIR"
SLURM_PROGRAMS = {"sbatch", "squeue", "scancel", "sinfo", "srun", "slurmctld", "slurmd", "munged", "scontrol"}
SEARCH_SCRIPTS = ("search.py", "study.py", "fairnas-search", "fairnas-study", "fairnas.tasks.search")
TRAINING_SCRIPTS = ("train.py", "compare.py", "fairnas-train", "fairnas-compare", "fairnas.tasks.train")

PROCESS_HOOK = """
with open("/proc/self/cmdline", "rb") as file:
    argv = [part.decode(errors="replace") for part in file.read().split(b"\\0") if part]
line = {"pid": os.getpid(), "argv": argv, "test": os.environ.get("PYTEST_CURRENT_TEST", "")}
with open(os.path.join(os.environ["FAIRNAS_SUITE_PROFILE_DIR"], "processes.jsonl"), "a") as file:
    file.write(json.dumps(line) + "\\n")
"""
PTH_LINE = (
    "import os, json; exec(os.environ['FAIRNAS_SUITE_PROFILE_HOOK'], {'os': os, 'json': json}) "
    "if os.environ.get('FAIRNAS_SUITE_PROFILE_DIR') and os.environ.get('FAIRNAS_SUITE_PROFILE_HOOK') else None\n"
)


# --- the plugin, loaded in pytest's process and in every xdist worker ------------------------------------------------


class _Probe:
    """Counts what the running test starts in this process: Lightning fits, search loops, other programs."""

    def __init__(self) -> None:
        self.fits = 0
        self.searches = 0
        self.programs: list[str] = []
        self.patched: set[str] = set()

    def install(self) -> None:
        """Count the programs started from now on; Lightning fits and search loops once their modules are imported
        (called again before each test: a test may import them first)."""
        if not self.patched:
            original_init = subprocess.Popen.__init__
            probe = self

            def popen_init(popen, args, *rest, **options):
                program = args if isinstance(args, str | bytes | os.PathLike) else args[0]
                probe.programs.append(Path(os.fsdecode(program).split()[0]).name)
                original_init(popen, args, *rest, **options)

            subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
            self.patched.add("subprocess")
        if "pytorch_lightning" in sys.modules and "fit" not in self.patched:
            self._count(sys.modules["pytorch_lightning"].Trainer, "fit", "fits")
            self.patched.add("fit")
        if "fairnas.search.loop" in sys.modules and "search" not in self.patched:
            self._count(sys.modules["fairnas.search.loop"]._SearchLoop, "run", "searches")
            self.patched.add("search")

    def _count(self, owner: type, method: str, counter: str) -> None:
        original = getattr(owner, method)
        probe = self

        def counted(*args, **kwargs):
            setattr(probe, counter, getattr(probe, counter) + 1)
            return original(*args, **kwargs)

        setattr(owner, method, counted)

    def take(self) -> dict:
        taken = {"fits": self.fits, "searches": self.searches, "programs": sorted(set(self.programs))}
        self.fits, self.searches, self.programs = 0, 0, []
        return taken


_probe = _Probe()
_phases: dict[str, dict] = defaultdict(dict)


def pytest_runtest_setup(item):
    if os.environ.get(RECORDS):
        _probe.install()


def pytest_runtest_logreport(report):
    if not os.environ.get(RECORDS) or hasattr(report, "node"):  # xdist's controller replays its workers' reports
        return
    row = _phases[report.nodeid]
    row[report.when] = round(report.duration, 3)
    if report.when == "call" or report.outcome != "passed":
        row.setdefault("outcome", report.outcome if report.when == "call" else f"{report.when} {report.outcome}")
    if report.when == "teardown":
        row.update(_probe.take(), test=report.nodeid, worker=os.environ.get("PYTEST_XDIST_WORKER", "main"))
        path = Path(os.environ[RECORDS]) / f"tests-{os.getpid()}.jsonl"
        with path.open("a") as file:
            file.write(json.dumps(_phases.pop(report.nodeid)) + "\n")


# --- the command ------------------------------------------------------------------------------------------------------


def kind_of(test: dict, processes: list[list[str]]) -> str:
    """The first kind, in the module docstring's order, that applies to ``test`` (its in-process counts) and the
    Python ``processes`` it started (their command lines)."""
    words = [Path(part).name for argv in processes for part in argv[1:3]]
    programs = set(test["programs"])
    if "pip" in words or any(argv[1:3] == ["-m", "pip"] for argv in processes):
        return "install"
    if any("chrom" in program for program in programs):
        return "browser"
    if programs & SLURM_PROGRAMS:
        return "slurm"
    if test["searches"] or any(word in SEARCH_SCRIPTS for word in words):
        return "search"
    if test["fits"] or any(word in TRAINING_SCRIPTS for word in words):
        return "training"
    return "subprocess" if processes else "unit"


def read_profile(folder: Path):
    """(one row per test, the Python processes started outside any test) from a profiled run's records."""
    import pandas as pd

    lines = [line for path in sorted(folder.glob("tests-*.jsonl")) for line in path.read_text().splitlines()]
    tests = [json.loads(line) for line in lines]
    by_test: dict[str, list[list[str]]] = defaultdict(list)
    outside = 0
    records = folder / "processes.jsonl"
    seen = set()  # a venv's lib64 -> lib link can make site read the same .pth twice: one process, two lines
    for line in records.read_text().splitlines() if records.exists() else []:
        process = json.loads(line)
        if process["pid"] in seen:
            continue
        seen.add(process["pid"])
        if process["test"]:
            by_test[process["test"].rsplit(" (", 1)[0]].append(process["argv"])
        else:
            outside += 1
    rows = []
    for test in tests:
        processes = by_test.get(test["test"], [])
        seconds = {phase: test.get(phase, 0.0) for phase in ("setup", "call", "teardown")}
        rows.append(
            {
                "test": test["test"],
                "module": test["test"].split("::")[0],
                "kind": kind_of(test, processes),
                "seconds": round(sum(seconds.values()), 3),
                **seconds,
                "outcome": test.get("outcome", ""),
                "python_processes": len(processes),
                "fits": test["fits"],
                "searches": test["searches"],
                "programs": " ".join(test["programs"]),
                "worker": test["worker"],
            }
        )
    return pd.DataFrame(rows).sort_values("seconds", ascending=False), outside


def summary(frame, outside: int, *, label: str, command: str, wall: float, exit_code: int) -> str:
    """The profile as Markdown: totals, seconds by kind and by module, the 15 slowest tests."""

    def grouped(by: str):
        table = frame.groupby(by).agg(
            tests=("test", "size"), seconds=("seconds", "sum"), python_processes=("python_processes", "sum")
        )
        table["share"] = (table["seconds"] / frame["seconds"].sum()).round(3)
        return table.sort_values("seconds", ascending=False).round(1).to_markdown()

    outcomes = ", ".join(f"{count} {outcome}" for outcome, count in frame["outcome"].value_counts().items())
    slowest = frame.head(15)[["test", "kind", "seconds", "setup", "call", "python_processes"]]
    return (
        "\n\n".join(
            [
                f"# Test suite profile: {label}",
                f"`{command}`: {wall:.0f} s wall, exit code {exit_code}; {len(frame)} tests ({outcomes}); "
                f"{frame['seconds'].sum():.0f} s summed over tests; {frame['python_processes'].sum() + outside} Python "
                f"processes started ({outside} outside any test: pytest itself, xdist workers).",
                "## By kind\n\n" + grouped("kind"),
                "## By module\n\n" + grouped("module"),
                "## The 15 slowest tests\n\n" + slowest.to_markdown(index=False),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="names the files written, e.g. before, default, integration")
    parser.add_argument("--output", type=Path, help="default: results/test_suite_profile/<label>")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    pth = Path(sysconfig.get_paths()["purelib"]) / f"_fairnas_suite_profile_{os.getpid()}.pth"  # one per run
    with tempfile.TemporaryDirectory() as records:
        plugin_path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, RECORDS: records, "FAIRNAS_SUITE_PROFILE_HOOK": PROCESS_HOOK, "PYTHONPATH": plugin_path}
        command = [sys.executable, "-m", "pytest", "-p", "suite_profile", *args.pytest_args]
        pth.write_text(PTH_LINE)
        try:
            started = time.perf_counter()
            exit_code = subprocess.call(command, cwd=REPOSITORY, env=env)
            wall = time.perf_counter() - started
        finally:
            pth.unlink(missing_ok=True)
        frame, outside = read_profile(Path(records))
    shown = " ".join(["python -m pytest", *args.pytest_args])
    text = summary(frame, outside, label=args.label, command=shown, wall=wall, exit_code=exit_code)
    output = args.output or REPOSITORY / "results" / "test_suite_profile" / args.label
    output.mkdir(parents=True, exist_ok=True)
    frame.to_csv(output / "tests.csv", index=False)
    (output / "summary.md").write_text(text)
    command_line = " ".join(
        ["python bench/suite_profile.py --label", args.label, *(["--", *args.pytest_args] if args.pytest_args else [])]
    )
    results.write_manifest(output, commands=[command_line], wall_seconds=round(wall), exit_code=exit_code)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
