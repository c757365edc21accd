"""The GPU acceptance checks, one command: every GPU path of fairnas run and timed on this machine's first GPU,
summarised with the device, the versions, the commit and every figure in ``<out>/gpu_check.json`` and ``gpu_check.md``.

    python bench/gpu_check.py --out outputs/gpu_check          # about 8 minutes on one H100 / H200

Checks, each a subprocess of the documented command (a failing one is recorded and the others still run):

- ``gpu_tests``: the suite's tests that need CUDA (``pytest -m gpu``);
- ``train_default``: ``train.py trainer=gpu`` on the embedded synthetic faces;
- ``train_paper_dpn``: the paper's DPN (``backbone=dpn_paper head=cosface``) at 112 px, 400 identities, 2 epochs,
  batch 128;
- ``search``: ``search.py`` with ``trainer=gpu`` in its training overrides, 24 epochs of budget and its final stage;
- ``metrics``: the exact metric engine at N = 100,000 (D = 512) with a float32 and a bfloat16 product, each
  against its bound, the bare N x N x D product in that dtype, with a profile of where the rest of the time goes;
  then at 1M on a separable set, like a trained model's embeddings, where bfloat16 can pay
  (``bench/metrics_speed.py``; goal: exact ranks at 1M in <= 8 s, the two precisions' ranks identical); then the
  engine's per-identity maximum of one 1M-image block against two ways without atomics
  (``bench/identity_max_speed.py``);
- ``throughput``: ``bench/training_speed.py`` at 112 px, batch 256: Lightning against the bare loop in bf16 (goal
  >= 0.95x), and the paper's DPN and dpn68 in fp32, bf16 and channels_last, with each one's model FLOP
  utilisation: images/s x training FLOPs per image / the GPU's dense peak for that precision (bf16 tensor cores;
  fp32 runs count against the TF32 peak, as cuDNN convolutions use TF32 by default). Goals: the paper's DPN at
  >= 14,000 img/s in bf16, and bf16 faster than fp32 on dpn68. Also one optimizer step alone, for-loop, foreach
  and fused, for SGD and AdamW (``--parts optimizer``: whether ``optimizer.fused`` pays for SGD on the GPU);
- ``profile``: the Lightning loop's steps (tiny DPN, 112 px, bf16, batch 256) under ``torch.profiler``: wall, host
  and device milliseconds per step, device-to-host reads and stream synchronisations per step, and the operations
  that take the most host time;
- ``compiled``: the paper's DPN in bf16 with channels_last under ``torch.compile``, timed after compilation, beside
  its eager run, with the compilation's seconds and the training steps after which it has paid them back;
- ``ddp``: ``train.py trainer=ddp`` over every GPU, when there are two or more;
- ``trials_per_gpu``: trials per hour of a 16-trial random search with 1, 2 and 4 trials sharing each GPU
  (``search.trials_per_gpu``), on the default search's trials and on the paper's DPN space at 112 px.

``--checks`` runs some of them, in the order given (``--checks throughput,metrics``). Each result holds its own
``check_s``.

Peaks are the data-sheet figures of the SXM parts (``PEAKS``); ``--peak-bf16`` and ``--peak-tf32`` (TFLOP/s) set
them for another GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytorch_lightning as pl
import torch

from bench.evidence.gpu_check_report import exact_metrics_met, met, paper_dpn_bf16

REPOSITORY = Path(__file__).resolve().parents[1]
PEAKS = {"H200": (989.4, 494.7), "H100": (989.4, 494.7), "A100": (312.0, 156.0), "L40S": (362.1, 183.0)}
"""Dense tensor-core TFLOP/s (bf16, TF32) by device name."""
PAPER_DPN = ["backbone=dpn_paper", "head=cosface", "data.table.n_identities=400", "data.table.image_size=112"]
PAPER_DPN += ["data.transforms.resize=120", "data.batch_size=128", "trainer.max_epochs=2"]
GPU_TRIAL = ["trainer=gpu", "logger=none"]
"""A trial's training overrides: the GPU set-up, and no W&B (GPU images often lack ``wandb``; files are written
regardless)."""
SEARCH = [f"search.train_overrides=[{','.join(map(repr, GPU_TRIAL))}]", "logger=none", "search.total_budget=24"]
SEARCH += ["search.final.top_k=2"]
SEARCH += ["search.final.seeds=1"]
CHECKS = ("gpu_tests", "train_default", "train_paper_dpn", "search", "metrics", "throughput", "profile", "compiled")
CHECKS += ("ddp", "trials_per_gpu")
SHARING = ["logger=none", "search.strategy=random", "search.n_trials=16", "search.final.seeds=0"]
"""The trials_per_gpu check's search: 16 random trials of the default search space, no final stage."""
METRIC_SETS = {
    "hard": ["--sizes", "100000", "--profile"],
    "separable": ["--sizes", "1000000", "--noise-scale", "2.0", "--methods", "float32", "bfloat16"],
}
"""The metrics check's data sets and sizes (``bench/metrics_speed.py``): its hard default at 100k, profiled, and a
separable one at 1M, like a trained model's embeddings, where the goal is judged. The hard set at 1M (error 0.9:
too many impostors near each genuine score for the bfloat16 product to pay) took 38-39 s with either precision on
an H200 (``results/gpu_check/``) and about 100 s of the check; ``bench/metrics_speed.py --sizes 1000000`` still
times it."""
IDENTITY_MAX = ["--images", "1000000"]
"""The metrics check's last step: the engine's per-identity maximum of one block at N = 1M against two ways without
atomics (``bench/identity_max_speed.py``), for the reduction a GPU profile may blame."""
SHARING_IMAGES = {"default": [], "paper_112px": ["data.table.image_size=112", "data.transforms.resize=120"]}


def run(command: list[str], timeout: float, check: bool = True) -> tuple[float, str]:
    """Wall seconds and output of ``command`` (in the repository); a failure raises with its last lines when
    ``check``."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    return time.perf_counter() - start, done.stdout + done.stderr


def train(out: Path, name: str, overrides: list[str]) -> dict[str, Any]:
    folder = out / "runs" / name
    command = [sys.executable, "train.py", "logger=none", f"hydra.run.dir={folder}", *overrides]
    seconds, _ = run(command, timeout=600)
    metrics = json.loads((folder / "metrics.json").read_text())
    return {
        "wall_s": round(seconds, 1),
        **{f"{split}_{key}": metrics[split][key] for split in ("val", "test") for key in ("error", "rank_disparity")},
    }


def gpu_tests(out: Path) -> dict[str, Any]:
    # a test module whose optional imports the GPU image lacks must not keep the gpu tests from running
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += ["--continue-on-collection-errors", "tests/"]
    seconds, output = run(command, timeout=900, check=False)  # collection errors of other modules exit non-zero
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", output))
    failures = re.findall(r"^FAILED (\S+)", output, flags=re.MULTILINE)
    passed = not failures and counts.get("passed", 0) > 0
    return {"wall_s": round(seconds, 1), **counts, "failed_tests": failures, "goal_met": passed}


def search(out: Path) -> dict[str, Any]:
    folder = out / "search"
    command = [sys.executable, "search.py", *SEARCH, f"hydra.run.dir={folder}"]
    seconds, _ = run(command, timeout=900)
    trials = pd.read_csv(folder / "trials.csv")
    return {
        "wall_s": round(seconds, 1),
        "trials": len(trials),
        "final_runs": len(pd.read_csv(folder / "final_trials.csv")),
    }


def metrics(out: Path) -> dict[str, Any]:
    """The exact metric engine with a float32 and a bfloat16 product, each against its own product bound: on the
    benchmark's hard set at 100k, profiled, and on its separable set at 1M (:data:`METRIC_SETS`;
    ``bench/metrics_speed.py``'s docstring: the bfloat16 product pays only where few impostors score near the
    genuine score)."""
    command = [sys.executable, "bench/metrics_speed.py", "--device", "cuda", "--naive-max", "0"]
    found: dict[str, Any] = {}
    goals = {}
    for data, options in METRIC_SETS.items():
        path = out / f"metrics_speed_{data}.json"
        run([*command, *options, "--output", str(path)], timeout=900)
        rows = json.loads(path.read_text())
        if any(row["n"] == 1_000_000 for row in rows):
            goals[f"goal_met_{data}"] = exact_metrics_met(rows)
        for row in rows:
            found[f"{data}_n{row['n']}"] = {
                precision: {
                    "seconds": row[precision]["seconds"],
                    "rank": row[precision]["metrics"]["rank"],
                    **_bound(row, precision),
                    **({"profile": row[precision]["profile"]} if "profile" in row[precision] else {}),
                }
                for precision in ("float32", "bfloat16")
            }
    identical = all(size["float32"]["rank"] == size["bfloat16"]["rank"] for size in found.values())
    reduction = out / "identity_max.csv"
    command = [sys.executable, "bench/identity_max_speed.py", "--device", "cuda", *IDENTITY_MAX]
    run([*command, "--output", str(reduction)], timeout=300)
    return {**found, "identical": identical, **goals, "identity_max": pd.read_csv(reduction).to_dict("records")}


def _bound(row: dict[str, Any], precision: str) -> dict[str, float]:
    """The bare product's seconds and the engine's ratio to them, where the row timed the bound."""
    bound = row.get(f"bound_{precision}")
    if bound is None:
        return {}
    return {"bound_s": bound["seconds"], "to_bound": row[precision]["seconds"] / bound["seconds"]}


def training_speed(folder: Path, parts: str, options: list[str]) -> None:
    command = [sys.executable, "bench/training_speed.py", "--device", "cuda", "--parts", parts, "--batch-size", "256"]
    command += ["--loop-image-size", "112", "--loop-bf16", "--steps", "30", "--warmup", "10"]
    run([*command, *options, "--output-dir", str(folder)], timeout=1200)


def throughput(out: Path, peaks: tuple[float, float] | None) -> dict[str, Any]:
    folder = out / "throughput"
    training_speed(folder, "loop,models,optimizer", ["--channels-last"])
    summary = throughput_summary(pd.read_csv(folder / "loop.csv"), pd.read_csv(folder / "models.csv"), peaks)
    return {**summary, "optimizer": pd.read_csv(folder / "optimizer.csv").to_dict("records")}


def profile(out: Path) -> dict[str, Any]:
    folder = out / "profile"
    training_speed(folder, "profile", [])
    top = pd.read_csv(folder / "profile.csv").head(10)
    return {**pd.read_csv(folder / "profile_summary.csv").iloc[0].to_dict(), "operations": top.to_dict("records")}


def compiled(out: Path, peaks: tuple[float, float] | None) -> dict[str, Any]:
    """Whether compiling the paper's DPN pays in the default GPU set-up, and after how many steps."""
    folder = out / "compiled"
    training_speed(folder, "compile", [])
    payback = pd.read_csv(folder / "compile_payback.csv").iloc[0].to_dict()
    return {"models": with_utilisation(pd.read_csv(folder / "compile.csv"), peaks).to_dict("records"), **payback}


def with_utilisation(models: pd.DataFrame, peaks: tuple[float, float] | None) -> pd.DataFrame:
    """``models`` with each variant's model FLOP utilisation (``mfu``) against its precision's peak, when known."""
    models = models.copy()
    if peaks is not None:
        peak = models["variant"].str.startswith("bf16").map({True: peaks[0], False: peaks[1]}) * 1e12
        models["mfu"] = models["images/s"] * models["GFLOP/image"] * 1e9 / peak
    return models


def throughput_summary(loop: pd.DataFrame, models: pd.DataFrame, peaks: tuple[float, float] | None) -> dict[str, Any]:
    """``training_speed``'s tables with each variant's model FLOP utilisation (``mfu``, when the peaks are known)
    and the throughput goals, each met or not."""
    models = with_utilisation(models, peaks)
    rate = models.set_index(["model", "variant"])["images/s"]
    ratio = float(loop.loc[loop["loop"] == "Lightning", "ratio to bare"].iloc[0])
    paper_bf16 = paper_dpn_bf16(rate)
    dpn68_bf16_faster = bool(rate["timm dpn68", "bf16"] > rate["timm dpn68", "fp32"])
    return {
        "loop": loop.to_dict("records"),
        "models": models.to_dict("records"),
        "lightning_to_bare": ratio,
        "lightning_to_bare_goal_met": met("loop_ratio", ratio),
        "paper_dpn_bf16_images_per_s": paper_bf16,
        "paper_dpn_goal_met": met("paper_dpn_bf16_images_per_s", paper_bf16),
        "dpn68_bf16_faster_than_fp32": dpn68_bf16_faster,
    }


def device_facts() -> dict[str, Any]:
    """The device, the versions, the date and the commit checked (with ``+dirty`` when the work tree differs)."""
    return {
        "commit": source_commit(),
        "device": torch.cuda.get_device_name(0),
        "gpus": torch.cuda.device_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "lightning": pl.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def source_commit() -> str:
    """``git describe --always --dirty=+dirty`` of the repository, or "unknown" outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty=+dirty"], cwd=REPOSITORY, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def device_peaks(name: str, bf16: float | None, tf32: float | None) -> tuple[float, float] | None:
    """(bf16, TF32) dense TFLOP/s: the given ones, else the data sheet's for ``name``, else None (no MFU)."""
    if bf16 is not None and tf32 is not None:
        return bf16, tf32
    return next((peaks for key, peaks in PEAKS.items() if key in name), None)


def markdown(summary: dict[str, Any]) -> str:
    facts = summary["facts"]
    lines = [
        f"# GPU check: {facts['device']} x {facts['gpus']}, {facts['date']}, commit {facts['commit']}",
        "",
        f"torch {facts['torch']} (CUDA {facts['cuda']}), Lightning {facts['lightning']}, Python {facts['python']}; "
        f"peaks (bf16, TF32 TFLOP/s): {summary['peaks'] or 'unknown: no MFU'}",
        "",
    ]
    for name, result in summary["checks"].items():
        lines += [f"## {name}", ""]
        if "error" in result:
            lines += [f"not measured: {result['error'].splitlines()[-1] if result['error'] else 'failed'}", ""]
            continue
        for key, value in result.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                lines += ["", pd.DataFrame(value).to_markdown(index=False, floatfmt=".3f"), ""]
            else:
                lines.append(f"- {key}: {value}")
        lines.append("")
    return "\n".join(lines)


def trials_per_gpu(out: Path, shares: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    """Trials per hour with k trials sharing each GPU (``search.trials_per_gpu``), for the default search's trials
    and for the paper's DPN space at 112 px; the best k of each is the evidence for the key's default."""
    rows = []
    for share in shares:  # both kinds at each k before the next k: a check cut off short still compares them
        for images, image_overrides in SHARING_IMAGES.items():
            train_overrides = ",".join(f'"{override}"' for override in [*GPU_TRIAL, *image_overrides])
            folder = out / "trials_per_gpu" / f"{images}_k{share}"
            command = [sys.executable, "search.py", f"search.train_overrides=[{train_overrides}]", *SHARING]
            command += [f"search.trials_per_gpu={share}", f"hydra.run.dir={folder}"]
            seconds, _ = run(command, timeout=900)
            trials = len(pd.read_csv(folder / "trials.csv"))
            rows.append({"trials": images, "k": share, "wall_s": seconds, "trials_per_hour": trials * 3600 / seconds})
            pd.DataFrame(rows).to_csv(out / "trials_per_gpu.csv", index=False)  # kept if a later search is cut off
    table = pd.DataFrame(rows)
    best = table.loc[table.groupby("trials")["trials_per_hour"].idxmax()]
    return {"runs": rows, **{f"best_k_{row.trials}": int(row.k) for row in best.itertuples()}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPOSITORY / "outputs" / "gpu_check")
    parser.add_argument("--peak-bf16", type=float, help="the GPU's dense bf16 TFLOP/s (default: PEAKS)")
    parser.add_argument("--peak-tf32", type=float, help="the GPU's dense TF32 TFLOP/s (default: PEAKS)")
    parser.add_argument("--checks", help=f"comma-separated, run in this order (default: all): {', '.join(CHECKS)}")
    args = parser.parse_args(argv)
    names = args.checks.split(",") if args.checks else list(CHECKS)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise SystemExit(f"gpu_check: unknown --checks {', '.join(unknown)}; allowed: {', '.join(CHECKS)}")
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device here (torch.cuda.is_available() is False)")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    facts = device_facts()
    peaks = device_peaks(facts["device"], args.peak_bf16, args.peak_tf32)
    checks: dict[str, Callable[[], dict[str, Any]]] = {
        "gpu_tests": lambda: gpu_tests(out),
        "train_default": lambda: train(out, "default", ["trainer=gpu"]),
        "train_paper_dpn": lambda: train(out, "paper_dpn", ["trainer=gpu", *PAPER_DPN]),
        "search": lambda: search(out),
        "metrics": lambda: metrics(out),
        "throughput": lambda: throughput(out, peaks),
        "profile": lambda: profile(out),
        "compiled": lambda: compiled(out, peaks),
        "ddp": lambda: train(out, "ddp", ["trainer=ddp", f"trainer.devices={facts['gpus']}"]),
        "trials_per_gpu": lambda: trials_per_gpu(out),
    }
    summary: dict[str, Any] = {"facts": facts, "peaks": peaks, "checks": {}}
    for name in names:
        if name == "ddp" and facts["gpus"] < 2:
            summary["checks"][name] = {"error": f"needs two or more GPUs; this machine has {facts['gpus']}"}
            continue
        start = time.perf_counter()
        try:
            result = checks[name]()
        except Exception as error:  # recorded: the summary says what could not be measured, the rest still runs
            result = {"error": f"{type(error).__name__}: {error}"}
        summary["checks"][name] = {**result, "check_s": round(time.perf_counter() - start, 1)}
        print(f"gpu_check: {name} {summary['checks'][name]['check_s']:.0f} s", flush=True)
        (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
        (out / "gpu_check.md").write_text(markdown(summary))
    return summary


if __name__ == "__main__":
    main()
