"""Where the ``hf`` engine's model comes from: a checkpoint folder or a pinned hub snapshot, and
the device and dtype it runs on."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import torch

from benchcheck.devices import resolve_device
from benchcheck.errors import first_line

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_FILES = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]


class CheckpointUnavailable(ValueError):
    """A hub model that is neither a local folder nor in the hub cache, and cannot be fetched."""

    def __init__(self, model: str, revision: str | None, cause: BaseException) -> None:
        self.model, self.revision = model, revision
        super().__init__(f"cannot get model {model!r} at revision {revision or 'main'} from the hub "
                         f"(not in the local cache; {type(cause).__name__}: {first_line(cause, 200)})")


class NotACheckpoint(ValueError):
    """A local folder given as the model that holds no transformers checkpoint."""

    def __init__(self, folder: Path, why: str) -> None:
        super().__init__(f"--model {folder}: {why}")


def check_folder(folder: Path) -> Path:
    """``folder`` if it holds a model's configuration and weights; else ``NotACheckpoint`` (a
    mistyped folder would otherwise surface as transformers' traceback)."""
    if not (folder / "config.json").is_file():
        raise NotACheckpoint(folder, "not a checkpoint folder (no config.json in it)")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise NotACheckpoint(folder, "not a checkpoint folder (no *.safetensors or pytorch_model.bin weights in it)")
    return folder


def not_a_hub_id(model: str) -> str | None:
    """Why ``model`` (not a folder) was meant as a local folder, or None when it may be a hub id.

    A hub id is ``name`` or ``org/name``. A path that starts like one (``/``, ``./``, ``~``), that
    exists as a file, that has more than two parts, or whose first part is a folder here
    (``models/nosuch`` beside ``models/``) names a folder that is not there: saying so at once beats
    a hub request that fails only after its network timeout when offline.
    """
    p = Path(model)
    if p.exists():
        return "a file, not a checkpoint folder"
    parts = PurePosixPath(model.replace("\\", "/")).parts
    if model.startswith(("/", "./", "../", "~", ".\\")) or len(parts) > 2:
        return "no such folder"
    if len(parts) == 2 and Path(parts[0]).is_dir():
        return f"no such folder (there is a folder {parts[0]}/ here, but no {parts[1]} in it)"
    return None


def resolve_checkpoint(model: str | Path, revision: str | None) -> tuple[Path, str | None]:
    """A local checkpoint folder for ``model`` and the revision it holds.

    A folder is used as it is. Anything else is a hub repo id at ``revision``. A commit hash
    is looked up in the local hub cache first (a pinned snapshot never changes, and GPU nodes are
    often offline); otherwise, or when it is not cached, it is fetched. The revision returned is
    the commit the snapshot resolved to.
    """
    if Path(model).is_dir():
        return check_folder(Path(model)), revision
    if (why := not_a_hub_id(str(model))) is not None:
        raise NotACheckpoint(Path(model), why)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    folder: str | None = None
    if revision is not None and re.fullmatch(r"[0-9a-f]{40}", revision):
        try:
            folder = snapshot_download(
                repo_id=str(model), revision=revision, allow_patterns=_HUB_FILES, local_files_only=True
            )
        except LocalEntryNotFoundError:
            folder = None
    if folder is None:
        try:
            folder = snapshot_download(repo_id=str(model), revision=revision, allow_patterns=_HUB_FILES)
        except Exception as e:  # network, offline mode, auth, missing repo: hub and httpx/requests types
            raise CheckpointUnavailable(str(model), revision, e) from e
    return Path(folder), Path(folder).name


def pick_device(device: str) -> torch.device:
    """``--device`` as a torch device (``benchcheck.devices``: checked against this machine)."""
    return torch.device(resolve_device(device))


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto``: bfloat16 on CUDA, float32 on the CPU."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; choose from auto, {', '.join(_DTYPES)}") from None
