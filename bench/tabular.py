"""Build a tabular benchmark of the embedded problem, or describe one (``bench.comparison.table_builder`` builds,
``bench.comparison.table_report`` describes, ``fairnas.benchmarks.tables`` holds the shipped tables).

    python bench/tabular.py build --name dpn_showcase_noisy --seeds 5    # resumable: finished runs are read back
    python bench/tabular.py summary --name dpn_showcase_noisy            # size, front, spread of the table
    python bench/tabular.py landscape --name dpn_showcase_noisy          # does the space trade error for disparity?
    python bench/tabular.py surrogate --name dpn_showcase_noisy --group-by op0 op1 op2   # a surrogate, held out, and
                                                                       # its runs' seed noise beside the table's
    python bench/tabular.py live-check --name dpn_paper_sampled --studies results/showcase ...  # against real runs

On 2 cores, two single-threaded shards finish sooner than one two-threaded process::

    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_showcase_noisy --seeds 5 --shard 0/2 &
    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_showcase_noisy --seeds 5 --shard 1/2

A space too large for a grid is sampled instead (``fairnas.benchmarks.design``): ``--sobol N`` trains the first N
points of a scrambled Sobol sequence over it, and ``--anchors`` adds a smaller table's configurations, named as in
the whole space (``--anchor-fixed`` gives what that table holds fixed outside its space). The data of the paper's
whole space, from which a surrogate is fitted::

    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_paper_sampled --seeds 2 \\
        --space searchspaces/dpn_paper_group_sampling.yaml --sobol 256 \\
        --anchors searchspaces/dpn_table.yaml --anchor-fixed optimizer=adamw --shard 0/2    # and --shard 1/2

More seeds where searches end (the best quarter by error), as a new table that leaves the one it extends as it was
(the table the planned comparison was run on stays reproducible)::

    OMP_NUM_THREADS=1 python bench/tabular.py build --name dpn_paper_top5 --extends dpn_paper_sampled --seeds 2 \\
        --top-seeds 5 ... (the build command of dpn_paper_sampled) --shard 0/2    # and --shard 1/2

Runs live in ``outputs/tabular/<name>/<config id>/seed<s>/`` of the repository (``--work-dir``); the finished
ones are also kept in the record ``<tables>/<name>.runs.csv`` until the table is written. Commit the record, and a
build from a fresh clone trains only the runs missing from it.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import yaml

from bench.comparison import live_check
from bench.comparison.command_line import parse_shard
from bench.comparison.table_builder import MAX_BUDGET, SEEDS, SPACE, build
from bench.comparison.table_report import REALISM_WORLDS, landscape, realism_report, summary, surrogate_validation
from fairnas.benchmarks.design import anchors, renamed, sobol_design
from fairnas.benchmarks.problems import table_surrogate
from fairnas.benchmarks.surrogate import FAMILIES
from fairnas.benchmarks.tables import TABLES, load_table
from fairnas.io import write_csv_atomic
from fairnas.search import load_space
from fairnas.training.run import train

REPOSITORY = Path(__file__).resolve().parents[1]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "summary", "landscape", "surrogate", "live-check"])
    parser.add_argument("--name", default="dpn_showcase_noisy")
    parser.add_argument("--work-dir", type=Path, help="run folders (default outputs/tabular/<name>)")
    parser.add_argument("--tables", type=Path, default=TABLES, help="folder of the table and its spec")
    parser.add_argument("--space", type=Path, default=SPACE, help="the discrete space file to tabulate")
    parser.add_argument("--max-budget", type=int, default=MAX_BUDGET, help="epochs of every run")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="training seeds 0 .. N-1 per configuration")
    parser.add_argument(
        "--top-seeds", type=int, help="build: also train seeds --seeds .. N-1 of the built table's top quarter by error"
    )
    parser.add_argument(
        "--extends", metavar="NAME", help="build: start from the built table NAME's runs, which stays as it is"
    )
    parser.add_argument("--overrides", nargs="*", default=[], help="train.py overrides after experiment=showcase")
    parser.add_argument("--sobol", type=int, help="train the first N points of a Sobol design instead of the grid")
    parser.add_argument("--sobol-seed", type=int, default=0, help="the design's scrambling seed")
    parser.add_argument("--anchors", type=Path, help="also train every configuration of this discrete space file")
    parser.add_argument(
        "--anchor-fixed", nargs="*", default=[], metavar="NAME=VALUE", help="the anchors' values outside their space"
    )
    parser.add_argument(
        "--shard",
        type=parse_shard,
        default=(0, 1),
        metavar="K/N",
        help="train every N-th configuration from the K-th (run N processes, K = 0..N-1)",
    )
    parser.add_argument(
        "--families", nargs="+", choices=sorted(FAMILIES), default=sorted(FAMILIES), help="surrogate mean models"
    )
    parser.add_argument("--group-by", nargs="*", default=[], help="surrogate: also hold out groups sharing these")
    parser.add_argument("--folds", type=int, default=5, help="surrogate: cross-validation folds")
    parser.add_argument(
        "--train-fractions",
        nargs="+",
        type=float,
        default=[1.0],
        help="surrogate: fit each fold on these shares of its training configurations (a learning curve)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="surrogate: draws of each training fraction below 1")
    parser.add_argument(
        "--realism-output", type=Path, help="surrogate: CSV of its runs' seed figures beside the table's (realism)"
    )
    parser.add_argument("--worlds", type=int, default=REALISM_WORLDS, help="surrogate: worlds the realism simulates")
    parser.add_argument("--output", type=Path, help="surrogate, live-check: CSV of the validation or the check")
    parser.add_argument("--studies", nargs="+", type=Path, default=[], help="live-check: study.py output folders")
    parser.add_argument(
        "--default", nargs="*", default=[], metavar="NAME=VALUE", help="live-check: the default model's configuration"
    )
    args = parser.parse_args(argv)
    if args.command == "surrogate":
        validation = surrogate_validation(
            *load_table(args.name, args.tables),
            args.families,
            args.group_by,
            args.folds,
            args.train_fractions,
            args.repeats,
        )
        if args.output is not None:
            write_csv_atomic(validation, args.output)
        print(validation.round(3).to_markdown(index=False), "\n")
        realism = realism_report(*load_table(args.name, args.tables), args.worlds)
        if args.realism_output is not None:
            write_csv_atomic(realism, args.realism_output)
        print(realism.round(4).to_markdown(index=False))
        return
    if args.command == "live-check":
        checks = live_checks(args)
        if args.output is not None:
            write_csv_atomic(pd.concat(checks, ignore_index=True), args.output)
        for check in checks:
            print(check.round(3).to_markdown(index=False), "\n")
        print(live_check.summary(checks))
        return
    if args.command == "build":
        work_dir = args.work_dir or REPOSITORY / "outputs" / "tabular" / args.name
        try:
            table = build(
                args.name,
                args.overrides,
                work_dir,
                train,
                args.tables,
                args.space.resolve(),
                args.max_budget,
                args.shard,
                args.seeds,
                configs=sampled_configs(args),
                command=" ".join(["python bench/tabular.py", *(argv if argv is not None else sys.argv[1:])]),
                top_seeds=args.top_seeds,
                extends=args.extends,
            )
        except ValueError as error:  # a bad table name, extension or setting: refused before its first run
            parser.error(str(error))
        if table is None:
            print(f"[table] shard {args.shard[0]}/{args.shard[1]} done; other shards still running")
            return
    if args.command == "landscape":
        for split in ("val", "test"):
            print(landscape(*load_table(args.name, args.tables), split=split), "\n")
        return
    print(summary(*load_table(args.name, args.tables)))


def sampled_configs(args: argparse.Namespace) -> list[dict] | None:
    """The design's configurations and the anchors (``--sobol``, ``--anchors``), or None for the space's grid."""
    if args.sobol is None and args.anchors is None:
        return None
    space = load_space(args.space)
    configs = [] if args.anchors is None else anchors(load_space(args.anchors), space, parse_fixed(args.anchor_fixed))
    return configs + ([] if args.sobol is None else sobol_design(space, args.sobol, seed=args.sobol_seed))


def live_checks(args: argparse.Namespace) -> list[pd.DataFrame]:
    """The surrogate of ``--name`` (one per split) read against each of ``--studies``, whose search space is
    ``--anchors`` (named in the table's space with ``--anchor-fixed``), and ``--default`` the default model."""
    if not args.studies or args.anchors is None or not args.default:
        raise SystemExit("live-check: give --studies, the studies' search space as --anchors, and --default")
    table, spec = load_table(args.name, args.tables)
    fits = {split: table_surrogate(table, spec, split) for split in ("val", "test")}
    space, study_space = fits["val"][0], load_space(args.anchors)
    surrogates = {split: surrogate for split, (_, _, surrogate) in fits.items()}
    fixed = parse_fixed(args.anchor_fixed)
    rename = functools.partial(renamed, table_space=study_space, space=space, fixed=fixed)
    default = parse_fixed(args.default, "--default")
    unknown = sorted(set(default) - set(space.keys))
    if unknown:
        raise SystemExit(f"--default: {unknown} name no hyperparameter of {sorted(space.keys)}")
    try:
        default = renamed(default, space, space, {})
    except ValueError as error:
        raise SystemExit(f"--default: {error}") from None
    return [live_check.live_check(surrogates, study, study_space, rename, default) for study in args.studies]


def parse_fixed(pairs: Sequence[str], option: str = "--anchor-fixed") -> dict[str, object]:
    """``NAME=VALUE`` pairs of ``option``, each value read as YAML (``adamw``, ``0.003``, ``2``)."""
    fixed = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise SystemExit(f"{option}: {pair!r} is not NAME=VALUE")
        fixed[name] = yaml.safe_load(value)
    return fixed


if __name__ == "__main__":
    main()
