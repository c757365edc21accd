"""The README and the docs are executable: every command line they show composes its Hydra config and passes the
command's own checks, up to the point where the command would read data or a checkpoint (nothing is trained or
loaded).

Collected from README.md, CONTRIBUTING.md and every page of the docs site (``docs/**/*.md``): every
``python <entry>.py ...`` (any ``python``, ``python3.11``, ``.venv/bin/python``; the top-level scripts only, not
``bench/``) and ``fairnas-<entry> ...`` command line, for the entries train, search,
evaluate, audit, compare and study, wherever it appears: lines of fenced code blocks (``\\`` continuations joined),
indented code lines, and inline code spans (also spans that wrap across lines, e.g. in tables and prose). Shell
syntax is read with :func:`shlex.split` (quotes, trailing ``# comments``), ``&&`` / ``;`` / ``|`` separate
commands. A console-script name alone in an inline span (``fairnas-evaluate``) names the command and is skipped.

Substitutions, where a page shows a placeholder for the reader's own value (nothing else is changed):

- ``<run>``, ``<baseline>``, ``<name>``, ``<search>``: the values in :data:`PLACEHOLDERS` (any other ``<...>``
  fails the test: add it there);
- a value written ``...`` (``ckpt=...``, ``data.root=...``): a real, empty temporary folder; a bare ``...``
  argument (more settings elided) is dropped;
- ``$HOME``: a temporary folder;
- ``compare.py front=<csv>``: the file must be named like a search's front; the check reads a front written into a
  temporary folder instead (one row: the default configuration of ``front_space``).
- ``compare.py reuse_runs=[...]``: each folder is replaced by an empty temporary folder (no run to read back).

Checks per entry, after ``fairnas.config.compose_config(entry, overrides)``:

- train: every interpolation resolves (``data_info``, which training fills in from the data, gets a stand-in),
  ``data.root`` is set, and the head, optimizer, scheduler and loss build from their config (as ``build_model``
  builds them first);
- search: ``run_face_search`` up to the first trial: settings (:class:`~fairnas.search.SearchSettings`), space
  file, space keys against the training config, objectives; and that training config sets ``data.root``;
- compare: ``run_comparison`` up to the first training run: its settings and every model x mitigation config,
  each of which sets ``data.root``;
- study: ``run_study`` up to its first training run: every study setting and every training config the study will
  train (``check_study``), each of which sets ``data.root``;
- evaluate, audit: the command up to loading the checkpoint (names, benchmarks and their folders; split,
  partitions, methods, estimators).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf, open_dict

from fairnas.config import compose_config, resolve_space_path
from fairnas.search import load_space
from fairnas.search.settings import check_compatible

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCUMENTS = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
ENTRIES = ("train", "search", "evaluate", "audit", "compare", "study")
SEPARATORS = {"&&", "||", ";", "|"}
PLACEHOLDERS = {
    "<run>": "2024-01-01_12-00-00",  # a run folder of outputs/train/
    "<baseline>": "2024-01-01_12-00-00",
    "<name>": "dpn_paper_local",  # a search's name (outputs/search/<name>)
    "<search>": "outputs/search/dpn_paper_local",
}
DATA_INFO = {"n_groups": 2, "num_classes": 10, "group_order": ["g0", "g1"]}  # what training records from the data


def code_snippets(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, text)`` of every fenced code line, indented code line and inline code span."""
    lines = text.splitlines()
    snippets, prose, fenced, i = [], [], False, 0
    while i < len(lines):
        line, number = lines[i], i + 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced or (line.startswith("    ") and "`" not in line):
            while line.rstrip().endswith("\\") and i + 1 < len(lines):  # a continued shell line
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i]
            snippets.append((number, "block", line))
        else:
            prose.append((number, line))
        i += 1
    # Inline spans may wrap onto the next prose line; never across a blank line (a new paragraph).
    joined, starts, offset = "", [], 0
    for number, line in prose:
        starts.append((offset, number))
        joined += line + "\n"
        offset += len(line) + 1
    for match in re.finditer(r"`([^`]+)`", joined):
        if "\n\n" not in match.group(1):
            number = max(n for start, n in starts if start <= match.start())
            snippets.append((number, "inline", match.group(1).replace("\n", " ")))
    return sorted(snippets)


def entry_command(tokens: list[str], kind: str) -> tuple[str, list[str]] | None:
    """``(entry, arguments)`` when ``tokens`` (one shell command) runs one of the commands, else None."""
    for k, token in enumerate(tokens):
        name = Path(token).name
        if name.startswith("fairnas-") and name.removeprefix("fairnas-") in ENTRIES:
            if kind == "inline" and k + 1 == len(tokens):  # the command's name in the text
                return None
            return name.removeprefix("fairnas-"), tokens[k + 1 :]
        if re.fullmatch(r"python[\d.]*", name) and k + 1 < len(tokens):
            script = Path(tokens[k + 1])
            if script.parent == Path(".") and script.suffix == ".py" and script.stem in ENTRIES:
                return script.stem, tokens[k + 2 :]
            return None
    return None


def document_commands(path: Path) -> list[tuple[str, int, str, str, list[str] | str]]:
    """``(file, line, source text, entry, arguments)`` of one Markdown file; arguments is the shlex error message
    where the line does not parse (that case then fails)."""
    name = path.relative_to(REPO).as_posix()
    commands = []
    for number, kind, snippet in code_snippets(path.read_text()):
        if not re.search(
            r"(python[\d.]*\s+(\./)?({})\.py|fairnas-({}))".format("|".join(ENTRIES), "|".join(ENTRIES)), snippet
        ):
            continue
        try:
            tokens = shlex.split(snippet, comments=True)
        except ValueError as error:
            commands.append((name, number, snippet, "unparsable", f"shlex: {error}"))
            continue
        segment: list[str] = []
        for token in [*tokens, "&&"]:
            if token not in SEPARATORS:
                segment.append(token)
                continue
            found = entry_command(segment, kind)
            if found is not None:
                commands.append((name, number, snippet, *found))
            segment = []
    return commands


COMMANDS = [command for path in DOCUMENTS if path.exists() for command in document_commands(path)]


def substitute(arguments: list[str], tmp_path: Path) -> list[str]:
    """A command's arguments with its placeholders filled in (see the module docstring)."""
    elided = tmp_path / "elided"
    elided.mkdir(exist_ok=True)
    filled = []
    for argument in arguments:
        if argument == "...":
            continue
        key, equals, value = argument.partition("=")
        if equals and value == "...":
            argument = f"{key}={elided}"
        argument = argument.replace("$HOME", str(tmp_path / "home"))
        for placeholder, stand_in in PLACEHOLDERS.items():
            argument = argument.replace(placeholder, stand_in)
        unknown = re.findall(r"<[^<>=\s]+>", argument)
        assert not unknown, f"placeholder {unknown} in {argument!r}: add a stand-in to PLACEHOLDERS"
        filled.append(argument)
    return filled


_COMPOSED: dict = {}


def compose(config_name: str = "train", overrides=(), output_dir=None):
    """``compose_config``, memoised for this module: the same training config recurs across commands (compare's
    model x mitigation pairs, a search's trial config), and composing takes ~0.15 s. Callers get a copy."""
    key = (config_name, tuple(overrides), None if output_dir is None else str(output_dir))
    if key not in _COMPOSED:
        _COMPOSED[key] = compose_config(config_name, overrides, output_dir=output_dir)
    return copy.deepcopy(_COMPOSED[key])


class ReachedTheRun(Exception):
    """Raised where the command would first read data, a checkpoint, or train: every check before it passed."""


def require_data_root(train_cfg) -> None:
    assert train_cfg.data.root is not None, "data.root is not set: the run would not find its data"


def check_train(cfg, tmp_path: Path) -> None:
    from hydra.utils import instantiate

    from fairnas.training.build import instantiate_partial

    with open_dict(cfg):
        cfg.data_info = cfg.data_info or DATA_INFO
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    require_data_root(cfg)
    instantiate_partial(cfg.head, "head")
    instantiate_partial(cfg.optimizer, "optimizer")
    if cfg.get("scheduler"):
        instantiate_partial(cfg.scheduler, "scheduler")
    instantiate(cfg.loss)


def check_search(cfg, tmp_path: Path, monkeypatch) -> None:
    from fairnas.tasks import search

    trial_configs = []

    def compose_and_check(config_name, overrides=(), output_dir=None):  # the search checks its space keys on it
        composed = compose(config_name, overrides, output_dir=output_dir)
        if config_name == "train":
            require_data_root(composed)
            trial_configs.append(composed)
        return composed

    def first_trial(target, space, settings, *, known_objectives=None, **_):
        check_compatible(settings, hyperparameters=list(space.keys), known_objectives=known_objectives)
        if not cfg.search.get("benchmark"):  # a benchmark problem's trials do not train
            assert trial_configs, "the search composed no training config before its first trial"
        raise ReachedTheRun

    monkeypatch.setattr(search, "compose_config", compose_and_check)
    monkeypatch.setattr(search, "run_search", first_trial)
    with pytest.raises(ReachedTheRun):
        search.run_face_search(cfg)


def read_data_where_it_is(module, monkeypatch) -> None:
    """The real data sets of the commands lie under /data on a user's machine, not here: the data a command reads
    before its first run (its groups, its splits) is read where its root exists, as for the embedded faces."""
    build = module.build_datamodule

    def build_where_present(config):
        root = OmegaConf.select(config, "data.root")
        return build(config) if root is None or Path(str(root)).exists() else None

    monkeypatch.setattr(module, "build_datamodule", build_where_present)


def check_compare(cfg, tmp_path: Path, monkeypatch) -> None:
    from fairnas.tasks import compare

    if cfg.front is not None:
        assert Path(cfg.front).name in {"final_front.csv", "pareto_front.csv"}, cfg.front
        default = dict(load_space(resolve_space_path(cfg.front_space)).configspace.get_default_configuration())
        config = {key: value.item() if hasattr(value, "item") else value for key, value in default.items()}
        front = tmp_path / "front" / Path(cfg.front).name
        front.parent.mkdir()
        pd.DataFrame([{"config_id": "c0", "config": json.dumps(config)}]).to_csv(front, index=False)
        pd.DataFrame({"seed": [0]}).to_csv(front.parent / "trials.csv", index=False)  # seeds the comparison avoids
        cfg.front = str(front)
    if cfg.reuse_runs:
        cfg.reuse_runs = [str(tmp_path / "reuse" / str(i)) for i, _ in enumerate(cfg.reuse_runs)]
        for folder in cfg.reuse_runs:
            Path(folder).mkdir(parents=True)
    compose_pair = compare._compose

    def compose_and_check(*args, **kwargs):  # every model x mitigation config, composed before any run trains
        composed = compose_pair(*args, **kwargs)
        require_data_root(composed)
        return composed

    def first_runs(jobs, pool, label):
        raise ReachedTheRun

    monkeypatch.setattr(compare, "compose_config", compose)
    monkeypatch.setattr(compare, "_compose", compose_and_check)
    monkeypatch.setattr(compare, "train_all", first_runs)
    read_data_where_it_is(compare, monkeypatch)
    with pytest.raises(ReachedTheRun):
        compare.run_comparison(cfg)


def check_study(cfg, overrides: list[str], monkeypatch) -> None:
    from fairnas.study import settings
    from fairnas.tasks import study

    def compose_and_check(config_name, overrides=(), output_dir=None):  # every config the study will train
        composed = compose(config_name, overrides, output_dir=output_dir)
        if config_name == "train":
            require_data_root(composed)
        return composed

    def first_run(*args, **kwargs):
        raise ReachedTheRun

    monkeypatch.setattr(settings, "compose_config", compose_and_check)
    monkeypatch.setattr(study, "compose_config", compose_and_check)
    monkeypatch.setattr(study, "run_all", first_run)
    monkeypatch.setattr(study, "search_faces", first_run)  # a study whose first stage is the search
    read_data_where_it_is(study, monkeypatch)
    with pytest.raises(ReachedTheRun):
        study.run_study(cfg, overrides)


def check_loading_command(entry: str, cfg, monkeypatch) -> None:
    """evaluate / audit: everything they check before ``load_run`` reads the checkpoint."""
    import importlib

    module = importlib.import_module(f"fairnas.tasks.{entry}")

    def load_run(*args, **kwargs):
        raise ReachedTheRun

    monkeypatch.setattr(module, "load_run", load_run)
    with pytest.raises(ReachedTheRun):
        getattr(module, entry)(cfg)


@pytest.mark.parametrize(
    ("document", "line", "source", "entry", "arguments"),
    COMMANDS,
    ids=[f"{document}:{line}: {source.strip()[:80]}" for document, line, source, _, _ in COMMANDS],
)
def test_readme_command_composes(document, line, source, entry, arguments, tmp_path, monkeypatch):
    assert entry in ENTRIES, f"{document}:{line} does not parse as a shell line: {arguments}"
    monkeypatch.chdir(tmp_path)  # relative paths of the command (outputs/...) land here if anything writes
    overrides = substitute(arguments, tmp_path)
    assert not [o for o in overrides if "data.table.root" in o], "the data set's folder is data.root"
    cfg = compose(entry, overrides, output_dir=tmp_path / "out")
    monkeypatch.setattr("fairnas.training.settings.torch.cuda.is_available", lambda: True)  # trainer=gpu commands
    if entry == "train":
        check_train(cfg, tmp_path)
    elif entry == "search":
        check_search(cfg, tmp_path, monkeypatch)
    elif entry == "compare":
        check_compare(cfg, tmp_path, monkeypatch)
    elif entry == "study":
        check_study(cfg, overrides, monkeypatch)
    else:
        check_loading_command(entry, cfg, monkeypatch)


def test_the_readme_commands_are_found():
    """The collection itself: every command appears, the ones in tables, prose and wrapped spans included, from the
    README and from every docs page that shows one."""
    by_entry = {entry: [line for _, line, _, e, _ in COMMANDS if e == entry] for entry in ENTRIES}
    assert all(by_entry.values()), by_entry
    documents = {document for document, *_ in COMMANDS}
    assert {
        "README.md",
        "CONTRIBUTING.md",
        "docs/getting_started.md",
        "docs/search.md",
        "docs/search_strategies.md",
        "docs/audits.md",
    } <= documents, sorted(documents)
    readme = [source for document, _, source, _, _ in COMMANDS if document == "README.md"]
    assert {entry for document, _, _, entry, _ in COMMANDS if document == "README.md"} == set(ENTRIES)  # the tour
    assert any(source.startswith("python3.11 -m venv") for source in readme)  # the set-up line, after `&&`
    sources = [source for _, _, source, _, _ in COMMANDS]
    assert any("data=celeba data.root=" in source for source in sources)  # a table cell
    assert any(
        source.startswith("python compare.py front=") and "train_overrides" in source for source in sources
    )  # an inline span wrapping onto the next line
    assert any(
        "search.dask_scheduler_file" in source and "train_overrides" in source for source in sources
    )  # a `\` continuation
    for path in DOCUMENTS:
        assert "data.table.root" not in path.read_text(), path


def test_ci_runs_the_readmes_two_commands_as_typed_before_anything_else():
    """``.ci/run`` starts with the README's set-up command and its test command, character for character (so a test
    that needs more than the README installs fails in CI, as it would for a new user); only then come the extras."""
    fenced = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    setup, tests = (block.strip() for block in fenced[:2])
    assert setup.startswith("python3.11 -m venv .venv") and tests.endswith("python -m pytest"), (setup, tests)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert f"( {setup} )" in ci and f"( {tests} )" in ci
    first, second = ci.index(f"( {setup} )"), ci.index(f"( {tests} )")
    commands = [k for k, line in enumerate(ci) if re.search(r"\b(pip|pytest|python\S*)\s", line.split("#")[0])]
    assert commands[:2] == [first, second], [ci[k] for k in commands[:2]]
