"""Build a wheelhouse: every wheel fairnas needs, to install it on compute nodes without network.

Run it from a source checkout on a machine with network (or a package index), with the interpreter of the Python
version and on the platform of the cluster's image (markers and wheels are chosen for the interpreter that runs it):

    python3.12 wheelhouse.py wheelhouse/ --extras moasha,slurm --exclude torch torchvision

then copy the folder to the cluster and, in the image's environment:

    pip install --no-index --find-links wheelhouse/ -r wheelhouse/requirements.txt

pip resolves fairnas and its extras for this interpreter (``pip install --dry-run --report``), fetches the binary
wheel of every package that has one and builds wheels for those published only as source archives (``pip wheel
--no-deps``: antlr4-python3-runtime, pynisher, smac), and builds fairnas's own wheel. ``--exclude`` leaves out what
the image already has, with every package only they need (CUDA libraries with torch). ``requirements.txt`` pins the
wheelhouse's packages, fairnas and its extras included; ``excluded.txt`` pins what it left out, which the image must
have.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # a bare interpreter: pip's own copy
    from pip._vendor.packaging.requirements import Requirement

SOURCE = Path(__file__).resolve().parent
PROJECT = "fairnas"


def canonical(name: str) -> str:
    """A distribution name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve(python: str, extras: Sequence[str]) -> list[dict]:
    """pip's installation report of fairnas with ``extras`` for ``python``, as if nothing were installed."""
    target = f"{SOURCE}[{','.join(extras)}]" if extras else str(SOURCE)
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        pip(python, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), target)
        return json.loads(report.read_text())["install"]


def needed(report: Iterable[dict], extras: Sequence[str], exclude: Iterable[str]) -> dict[str, str]:
    """Name -> version of every package the report installs that fairnas needs without passing through an
    ``exclude``d one: a walk of the dependency graph from fairnas with its ``extras``, markers evaluated for this
    interpreter."""
    packages = {canonical(item["metadata"]["name"]): item["metadata"] for item in report}
    skipped = {canonical(name) for name in exclude}
    unknown = skipped - set(packages)
    if unknown:
        raise SystemExit(f"wheelhouse: --exclude {sorted(unknown)} is not among fairnas's dependencies")
    kept: dict[str, str] = {}
    pending = [(PROJECT, tuple(extras))]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in seen or name in skipped:
            continue
        seen.add((name, wanted))
        metadata = packages[name]
        kept[name] = metadata["version"]
        for line in metadata.get("requires_dist", []):
            requirement = Requirement(line)
            contexts = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(c) for c in contexts):
                pending.append((canonical(requirement.name), tuple(sorted(requirement.extras))))
    return kept


def build(python: str, out: Path, extras: Sequence[str], exclude: Sequence[str]) -> dict[str, str]:
    """Fill ``out`` with the wheels of fairnas and what it needs; returns the pinned packages."""
    report = resolve(python, extras)
    packages = needed(report, extras, exclude)
    out.mkdir(parents=True, exist_ok=True)
    pip(python, "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(SOURCE))
    others = [f"{name}=={version}" for name, version in sorted(packages.items()) if name != PROJECT]
    pip(python, "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), *others)
    project = f"{PROJECT}[{','.join(extras)}]" if extras else PROJECT
    pins = [f"{project}=={packages[PROJECT]}", *others]
    (out / "requirements.txt").write_text("\n".join(pins) + "\n")
    left_out = sorted({canonical(item["metadata"]["name"]): item["metadata"]["version"] for item in report}.items())
    (out / "excluded.txt").write_text("".join(f"{n}=={v}\n" for n, v in left_out if n not in packages))
    return packages


def pip(python: str, *arguments: str) -> None:
    done = subprocess.run([python, "-m", "pip", *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"wheelhouse: pip {arguments[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the wheelhouse folder (created; existing wheels are kept)")
    parser.add_argument("--extras", default="", help="fairnas's extras, comma-separated (e.g. moasha,slurm)")
    parser.add_argument("--exclude", nargs="*", default=[], help="packages the target image has (e.g. torch)")
    args = parser.parse_args(argv)
    extras = [extra for extra in args.extras.split(",") if extra]
    packages = build(sys.executable, args.out, extras, args.exclude)
    print(f"wheelhouse: {len(packages)} packages in {args.out}; install with")
    print(f"  pip install --no-index --find-links {args.out} -r {args.out / 'requirements.txt'}")


if __name__ == "__main__":
    main()
