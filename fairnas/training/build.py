"""A run: how a training config becomes a model and its data, and how a finished run comes back.

``build_model(cfg)`` wires a composed training config to objects (the only place that does). ``load_run(path)`` is
the one way to rebuild a trained run (``resolve_device`` says where it goes): every checkpoint that ``train`` writes
carries the run's resolved config (``hyper_parameters["config"]``), so the checkpoint alone gives the model, its
weights (loaded with ``weights_only=True``: a checkpoint cannot run code) and its data split. A run that started from
another run's weights (``init_from``, e.g. SensitiveNets) holds those weights itself and does not need the other run
again.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from torch import nn

from fairnas.data import FaceDataModule
from fairnas.data.sampling import as_group_sampling
from fairnas.models import FaceEmbedder, ops_name
from fairnas.training.module import FaceRecognitionModule
from fairnas.training.settings import check_input_size, check_training_settings

FORMERLY_EXPORTED = ("celeba", "folders", "rfw", "vggface2")  # fairnas.data.formats exported them before its registry
EMBEDDER_PREFIX = "embedder."
CHECKPOINT_DIR, LAST_CHECKPOINT = "checkpoints", "last.ckpt"
# How torch's weights-only unpickler refuses to rebuild a Python object a file names (a class or a function: code).
CODE_REFUSAL = re.compile(r"GLOBAL (\S+)")
WEIGHTS_UNPICKLER_REASON = "WeightsUnpickler error:"  # torch's own reason follows its advice on weights_only
MOVED_TARGETS = {
    "fairnas.losses.FocalLoss": "fairnas.training.losses.FocalLoss",
    "fairnas.data.table.read_generic": "fairnas.data.formats.generic.read_generic",
    **{f"fairnas.data.formats.read_{name}": f"fairnas.data.formats.{name}.read_{name}" for name in FORMERLY_EXPORTED},
}
"""Where a ``_target_`` a saved run's config may name has moved since: :func:`load_run` follows it."""


@dataclasses.dataclass
class Run:
    """A trained run back from disk: its ``config``, evaluation-mode ``module`` and ``datamodule``.

    The data module is set up (its data set read) only when :meth:`data` is first called, so a run whose data set
    is elsewhere can still be evaluated on other benchmarks.
    """

    config: DictConfig
    module: FaceRecognitionModule
    datamodule: FaceDataModule
    checkpoint: Path

    @property
    def embedder(self) -> nn.Module:
        return self.module.embedder

    def data(self) -> FaceDataModule:
        """The run's data module with its splits as in training (the saved split file is read back)."""
        self.datamodule.setup()
        return self.datamodule

    @property
    def label(self) -> str:
        return model_label(self.config)


def build_datamodule(cfg: DictConfig) -> FaceDataModule:
    """The data module of ``cfg.data``. For a new run (``cfg.data_info`` unset) it is set up at once and what the
    data decides is recorded in ``cfg.data_info`` (``n_groups``, ``num_classes``, ``group_order``), where other
    configs interpolate it; a saved run's config already holds it."""
    _check_data_root(cfg)
    # A run saved before data.subset_seed existed drew its subset with the training seed: keep its data.
    legacy = {} if "subset_seed" in cfg.data else {"subset_seed": cfg.seed}
    datamodule = instantiate(cfg.data, seed=cfg.seed, **legacy)
    check_partial(datamodule.table_source, "data.table")
    if cfg.get("data_info") is None:
        datamodule.setup()
        with open_dict(cfg):
            cfg.data_info = {
                "n_groups": len(datamodule.group_order),
                "num_classes": datamodule.num_classes,
                "group_order": list(datamodule.group_order),
            }
    return datamodule


def _check_data_root(cfg: DictConfig) -> None:
    """``data.root`` is where the data set lives (its table reads ``${data.root}``); unset, the run stops here with
    one line. ``data.table.root=...``, the key before ``data.root``, still works: ``data.root`` takes its value."""
    data = cfg.data
    if "root" not in data or data.root is not None:  # set, or a run saved before data.root existed
        return
    table = data.get("table")
    if table is not None and table.get("root") is not None:
        with open_dict(cfg):
            data.root = table.root
        return
    raise ValueError("data.root is not set: the folder of the data set, e.g. data=celeba data.root=/data/celeba")


def build_embedder(cfg: DictConfig, *, init_weights: bool = True) -> nn.Module:
    """Backbone + embedding neck, started from ``cfg.init_from``'s embedder weights when set and
    ``init_weights``, inside the mitigation's ``embedder`` wrapper when it has one (SensitiveNets)."""
    embedder = FaceEmbedder(
        instantiate(cfg.backbone),
        embedding_dim=cfg.embedding_dim,
        dropout=cfg.dropout,
        channels_last=cfg.get("channels_last", False),  # a run saved before the key existed trained without it
    )
    if init_weights and cfg.get("init_from"):
        checkpoint, state = read_checkpoint(cfg.init_from, key="init_from")
        _load_weights(embedder, state["state_dict"], EMBEDDER_PREFIX, checkpoint, key="init_from")
    wrapper = (cfg.get("mitigation") or {}).get("embedder")
    return instantiate(wrapper, embedder=embedder) if wrapper else embedder


def build_model(cfg: DictConfig, *, init_weights: bool = True) -> tuple[FaceRecognitionModule, FaceDataModule]:
    """The LightningModule and data module a training config describes (see :func:`build_datamodule`)."""
    # Cheap parts first, so their errors come before the data set is rendered or indexed.
    check_training_settings(cfg)
    embedder = build_embedder(cfg, init_weights=init_weights)
    check_input_size(embedder, cfg.data.transforms.image_size)
    loss = instantiate(cfg.loss, **per_sample_loss(cfg))
    optimizer, head = instantiate_partial(cfg.optimizer, "optimizer"), instantiate_partial(cfg.head, "head")
    scheduler = instantiate_partial(cfg.scheduler, "scheduler") if cfg.get("scheduler") else None
    mitigation = cfg.get("mitigation") or {}
    margin_policy = instantiate(mitigation.margin_policy) if mitigation.get("margin_policy") else None
    datamodule = build_datamodule(cfg)
    regularizers = {name: instantiate(node) for name, node in (cfg.get("regularizer") or {}).items()}
    module = FaceRecognitionModule(
        embedder=embedder,
        head=head(embedding_dim=cfg.embedding_dim, num_classes=cfg.data_info.num_classes),
        loss=loss,
        optimizer=optimizer,
        scheduler=scheduler,
        horizon_epochs=(cfg.get("scheduler") or {}).get("horizon_epochs"),
        group_order=cfg.data_info.group_order,
        regularizers=regularizers,
        tta_flip=cfg.eval.tta_flip,
        rank_by=cfg.eval.rank_by,
        margin_policy=margin_policy,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    if cfg.get("compile"):  # in place: the state dict keeps its keys, so checkpoints load either way
        module.embedder.compile()
    return module, datamodule


def per_sample_loss(cfg: DictConfig) -> dict[str, str]:
    """The loss's arguments for one value per sample, when the group weights go into the loss
    (``data.group_sampling.via=loss``); else none."""
    sampling = as_group_sampling(cfg.data.get("group_sampling"))
    return {"reduction": "none"} if sampling.active and sampling.via == "loss" else {}


def instantiate_partial(node: DictConfig, key: str) -> Any:
    """``instantiate(node)`` for a ``_partial_`` config, its arguments checked now (see :func:`check_partial`)."""
    return check_partial(instantiate(node), key)


def check_partial(factory: Any, key: str) -> Any:
    """Hydra builds a ``_partial_`` object without calling its target, so an unknown argument would only fail when
    training reaches it: check the arguments against the target's signature at once, naming the config ``key``."""
    if isinstance(factory, functools.partial):
        try:
            inspect.signature(factory.func).bind_partial(*factory.args, **factory.keywords)
        except TypeError as error:
            raise ValueError(f"{key}: {factory.func.__qualname__} {error}") from None
    return factory


def resolve_device(name: str) -> torch.device:
    """Where a loaded run goes (evaluate's and audit's ``device``): ``auto`` is the first CUDA device when there is
    one, else the CPU; any other name is taken as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_run(
    path: str | Path, *, device: str | torch.device = "cpu", data_root: str | None = None, key: str = "ckpt"
) -> Run:
    """Rebuild the run of ``path`` (a checkpoint, or a run folder: its ``checkpoints/last.ckpt``); ``key`` names the
    setting in errors.

    The data split the run generated is read back from the split file it saved, found beside the checkpoint
    even when the run folder was moved; ``data_root`` replaces the data set's location.
    """
    checkpoint, state = read_checkpoint(path, key=key)
    config = OmegaConf.create(_follow_moved_targets(state["hyper_parameters"]["config"]))
    run_dir = checkpoint.parent.parent
    with open_dict(config):
        _relocate_data(config, data_root)
        _reuse_saved_split(config, Path(config.output_dir), run_dir)
        config.output_dir = str(run_dir)
        config.init_from = None  # the checkpoint holds those weights
    module, datamodule = build_model(config, init_weights=False)
    _load_weights(module, state["state_dict"], "", checkpoint, key=key)
    return Run(config, module.eval().to(device), datamodule, checkpoint)


def read_checkpoint(path: str | Path, key: str = "ckpt") -> tuple[Path, dict]:
    """The checkpoint file of ``path`` (a checkpoint, or a run folder: its ``checkpoints/last.ckpt``) and its contents,
    tensors on the CPU; ``key`` names the setting in errors.

    The one reader of every setting that names a checkpoint or run folder (train's ``resume_from``, ``init_from``,
    ``mitigation.checkpoint`` and ``resume=auto``'s ``last.ckpt``; evaluate's and audit's ``ckpt``), called before a
    command writes anything: a missing file, a folder that is no run, a damaged file, a file holding code and a
    checkpoint of something else each stop it with one line naming ``key`` and the file.
    """
    checkpoint = _checkpoint_file(path, key)
    state = _load_as_data(checkpoint, key)
    if not isinstance(state, dict) or "config" not in state.get("hyper_parameters", {}):
        raise ValueError(f"{key}: '{checkpoint}' carries no training config; it was not written by fairnas train")
    return checkpoint, state


def _checkpoint_file(path: str | Path, key: str) -> Path:
    """The file ``path`` names: itself, or a run folder's ``checkpoints/last.ckpt``."""
    if not isinstance(path, str | Path):
        raise ValueError(f"{key}={path}: name one checkpoint or run folder")
    path = Path(path).expanduser()
    if not path.is_dir():
        if not path.is_file():
            raise FileNotFoundError(f"{key}: checkpoint '{path}' does not exist")
        return path
    checkpoint = path / CHECKPOINT_DIR / LAST_CHECKPOINT
    if not checkpoint.is_file():
        raise FileNotFoundError(f"{key}: folder '{path}' is not a run: it has no {CHECKPOINT_DIR}/{LAST_CHECKPOINT}")
    return checkpoint


def _load_as_data(checkpoint: Path, key: str) -> Any:
    """``torch.load(weights_only=True)``: a checkpoint cannot run code. A file that holds code is told apart from a
    damaged one by torch's refusal to rebuild a named Python object (``GLOBAL <name>``); every other failure, an
    ``UnpicklingError`` over a damaged pickle included, means the file is not a readable checkpoint."""
    try:
        return torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as error:  # damaged bytes trip torch's reader anywhere: RuntimeError, OSError, EOFError, ...
        code = CODE_REFUSAL.search(str(error)) if isinstance(error, pickle.UnpicklingError) else None
        if code:
            raise ValueError(
                f"{key}: '{checkpoint}' holds pickled code ({code.group(1)}); checkpoints are loaded "
                "as data only (torch.load weights_only=True)"
            ) from None
        raise ValueError(
            f"{key}: '{checkpoint}' is not a readable PyTorch checkpoint (truncated, damaged or "
            f"another format: {_load_failure(error)})"
        ) from None


def _load_failure(error: Exception) -> str:
    """torch's reason in one line, e.g. ``RuntimeError: PytorchStreamReader failed reading zip archive: failed
    finding central directory``: the weights-only unpickler's own reason after its advice, else the first sentence
    of the message; only the error's type when it has none (an ``EOFError``)."""
    reason = str(error).split(WEIGHTS_UNPICKLER_REASON, 1)[-1]
    first_line = next((line.strip() for line in reason.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first_line.split('. ')[0]}" if first_line else type(error).__name__


def model_label(config: DictConfig) -> str:
    """Architecture (the paper's SMAC_xyz name for the searchable DPN, else the timm name) and head, e.g.
    ``SMAC_301_cosface``."""
    backbone = config.backbone
    architecture = ops_name(backbone.ops) if "ops" in backbone else backbone.get("name", backbone._target_)
    head = config.head._target_.rsplit(".", 1)[-1].removesuffix("Head").lower()
    return f"{architecture}_{head}"


def _load_weights(model: nn.Module, state: dict, prefix: str, source: str | Path, key: str) -> None:
    """Load the entries of ``state`` under ``prefix`` into ``model``; a mismatch is one line naming ``key``."""
    weights = {name[len(prefix) :]: value for name, value in state.items() if name.startswith(prefix)}
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:  # torch lists the missing / unexpected / mis-shaped weights after line 1
        detail = " ".join(line.strip() for line in str(error).splitlines()[1:3])
        detail = detail if len(detail) <= 300 else detail[:300] + " ..."
        raise ValueError(f"{key}: '{source}' does not match the model of this config: {detail}") from None


def _follow_moved_targets(node: Any) -> Any:
    """A saved config (plain dicts and lists) with every ``_target_`` that :data:`MOVED_TARGETS` names replaced by
    where it lives now."""
    if isinstance(node, dict):
        node = {key: _follow_moved_targets(value) for key, value in node.items()}
        if node.get("_target_") in MOVED_TARGETS:
            node["_target_"] = MOVED_TARGETS[node["_target_"]]
        return node
    if isinstance(node, list):
        return [_follow_moved_targets(item) for item in node]
    return node


def _relocate_data(config: DictConfig, data_root: str | None) -> None:
    """A saved config's data set at ``data_root`` when given. The stored config is resolved, so ``data.root`` and
    the table's ``root`` both hold the folder; runs saved before ``data.root`` existed have the table's only (the
    synthetic faces' as ``cache_dir``, renamed to ``root``)."""
    table = config.data.table
    if table.get("_target_") == "fairnas.data.sources.synthetic_faces" and "cache_dir" in table:
        table.root = table.pop("cache_dir")
    if data_root is None:
        return
    if "root" in config.data:
        config.data.root = data_root
    table.root = data_root


def _reuse_saved_split(config: DictConfig, old_dir: Path, run_dir: Path) -> None:
    """Point the data split at the split file the run saved (moved along with the run folder)."""
    split = config.data.table.get("split")
    if split is None or not split.get("save_to"):
        return
    saved = Path(split.save_to)
    if saved.is_relative_to(old_dir):
        saved = run_dir / saved.relative_to(old_dir)
    if saved.is_file():
        split.file, split.save_to = str(saved), None
