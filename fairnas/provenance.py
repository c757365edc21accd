"""Where a measurement ran: the machine and the commit of the fairnas source, as a record of a run states them."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path


def machine() -> str:
    """The machine a measurement ran on: the cores this process may use, the architecture, the CPU's widest vector
    units (CPU timings differ by 2-3x between AVX2 and AVX-512; omitted where /proc/cpuinfo cannot be read) and the
    Python version."""
    try:
        found = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    except OSError:
        found = None
    flags = set(found.group(1).split()) if found else set()
    vector = ", AVX-512" if "avx512f" in flags else ", AVX2" if "avx2" in flags else ""
    cores = len(os.sched_getaffinity(0))
    return f"{cores} CPU cores ({platform.machine()}{vector}), Python {platform.python_version()}"


def source_commit() -> str:
    """The short hash of the git checkout this fairnas was imported from (what a measurement ran at), empty when it
    is not in one (an installed wheel)."""
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True
    ).stdout.strip()
