"""Every ``python train.py`` and every search worker starts a fresh interpreter, so what the training path imports is
paid once per run: SMAC3 and timm (about 0.6 s each) load only where a search builds SMAC or a run builds a timm
backbone."""

import subprocess
import sys

LAZY = ("smac", "timm")


def test_the_training_and_trial_paths_import_neither_smac_nor_timm():
    probe = (
        "import sys, fairnas.tasks.train, fairnas.search.trial, fairnas.search.strategies; "
        f"print(sorted(name for name in {LAZY!r} if name in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
