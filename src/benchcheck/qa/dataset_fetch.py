"""A named dataset of the NVIDIA Dataset Service (seed 003): ``--dataset-name`` / ``--dataset-file``.

The dataset is downloaded by the user's own ``nvdataset`` CLI (not on PyPI), run as a child
process: ``nvdataset download <name> <dataset dir>``, bounded by ``--download-timeout``, its
output shown as it comes (its progress is the only sign of life). Or it is already on disk:
``VSS_EVAL_DATASET`` names an extracted dataset, used as it is.

**Contract** (what a download leaves, docs/qa.md): ``<dataset dir>/<dataset file>`` (the JSON
list, e.g. ``dataset_single_turn.json``) and ``<dataset dir>/videos/`` holding the clips, flat;
other files (``gt/`` reports, a multi-turn file) are ignored. Items name their clip by name
(:class:`benchcheck.qa.dataset.ClipIndex`). The default dataset dir is
``agent_eval/dataset/<name>`` under the current folder, the VSS layout, so outputs go to
``<dataset dir>/../../results/vlm_qa/`` = ``agent_eval/results/vlm_qa/`` unless ``--output-dir``.

**Credentials**: the first set of ``NVDATASET_API_KEY``, ``NVDATASET_NGC_API_KEY``,
``NGC_API_KEY`` (then a ``NVDATASET_DOTENV_PATH`` file or a Starfleet token from ``nvdataset auth
login``); the run prints ``dss credential: <name>`` (the name, never the value). The child gets
that one credential variable, the ``NVDATASET_*`` settings (tenancy: ``NVDATASET_TENANTID``,
``NVDATASET_GROUPID``) and the rest of the environment minus the judge's variables, every other
secret-named variable and the VLM's key variable (``--vlm-api-key-env``, whatever its name)
(:func:`benchcheck.masking.child_environment`): the judge's key, other keys and tokens never reach
it. The benchmark names no tenant of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchcheck.masking import Masker, child_environment
from benchcheck.qa.errors import PreconditionError

ENV_DATASET = "VSS_EVAL_DATASET"
CREDENTIAL_VARS = ("NVDATASET_API_KEY", "NVDATASET_NGC_API_KEY", "NGC_API_KEY")
TENANCY_VARS = ("NVDATASET_TENANTID", "NVDATASET_GROUPID")
DEFAULT_PARENT = Path("agent_eval") / "dataset"
DOWNLOAD_TIMEOUT_S = 1800.0
INSTALL_HINT = ("uv tool install --index https://artifactory.pdx.nvidia.com/artifactory/api/pypi/"
                "sw-ngc-data-platform-pypi-local/simple nvdataset")
_TAIL_LINES = 40

# Errors the seed names, each with what to do (docs/qa.md lists them all).
HINT_NO_CREDENTIAL = (
    "no DSS credential for downloading {name}: set NVDATASET_API_KEY to a Personal Key scoped to 'NVIDIA "
    "Dataset Service' (https://org.ngc.nvidia.com/setup/personal-keys, with the NGC org switched to the one "
    "owning the dataset), or run `nvdataset auth login` (add `--flow device` without a browser); or set "
    f"{ENV_DATASET} to an already-extracted dataset")
HINT_TENANT = (
    "nvdataset: 'Did not find tenant_id': you are signed in but no tenant is selected (SSO does not set one). "
    "Export NVDATASET_TENANTID and NVDATASET_GROUPID, or save them once with `nvdataset auth context add` and "
    "select it with `nvdataset auth context use <name>`; ask the dataset's owning team for its coordinates")
HINT_403 = (
    "nvdataset: the Dataset Service refused the credential (403). The run used {cred}: NVDATASET_API_KEY must be "
    "a Personal Key scoped to 'NVIDIA Dataset Service' in the org owning the dataset; the global NGC key "
    "(NGC_API_KEY, as the NGC CLI uses) returns 403. Group access needs membership in "
    "ngc-datasetservice-viewer-<tenant>-<group>")
HINT_NOT_INSTALLED = (
    "the nvdataset CLI ({bin}) is not found: it is not on PyPI; install it with `" + INSTALL_HINT + "`, or set "
    f"{ENV_DATASET} to an already-extracted dataset")


class DownloadError(Exception):
    """The download ran and failed (exit 3): the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class DatasetPlace:
    """Where a named dataset is (or goes) and where its outputs go."""

    name: str
    file: str
    root: Path  # the dataset dir: <root>/<file> and <root>/videos/
    from_env: bool  # named by VSS_EVAL_DATASET: used as it is, never downloaded into

    @property
    def dataset(self) -> Path:
        return self.root / self.file

    @property
    def videos(self) -> Path:
        return self.root / "videos"

    @property
    def default_output(self) -> Path:
        """``<dataset>/../../results/vlm_qa`` (seed 003)."""
        return Path(os.path.normpath(self.root.absolute() / ".." / ".." / "results" / "vlm_qa"))

    def ready(self) -> bool:
        return self.dataset.is_file() and self.videos.is_dir()


def place(name: str, file: str, dataset_dir: str | None, env: Mapping[str, str]) -> DatasetPlace:
    """The dataset's folder: ``--dataset-dir``, else ``VSS_EVAL_DATASET``, else the VSS layout's
    ``agent_eval/dataset/<name>``. Names are checked: they become a path and an argument."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise PreconditionError(f"--dataset-name {name!r}: a DSS dataset name (letters, digits, '.', '_', '-')")
    rel = Path(file)
    if not file or rel.is_absolute() or ".." in rel.parts:
        raise PreconditionError(f"--dataset-file {file!r}: a file name inside the dataset (e.g. "
                                "dataset_single_turn.json)")
    if dataset_dir:
        return DatasetPlace(name, file, Path(dataset_dir).absolute(), False)
    if env.get(ENV_DATASET, "").strip():
        return DatasetPlace(name, file, Path(env[ENV_DATASET].strip()).absolute(), True)
    return DatasetPlace(name, file, (DEFAULT_PARENT / name).absolute(), False)


def dss_credential(env: Mapping[str, str]) -> str | None:
    """The name of the credential ``nvdataset`` will use (never its value), or ``None``."""
    for name in CREDENTIAL_VARS:
        if env.get(name, "").strip():
            return name
    dotenv = env.get("NVDATASET_DOTENV_PATH", "").strip()
    if dotenv and Path(dotenv).expanduser().is_file():
        return f"NVDATASET_DOTENV_PATH={dotenv}"
    home = env.get("HOME", "").strip()
    if home and (Path(home) / ".nvdataset" / "starfleet_token.json").is_file():
        return "starfleet token (nvdataset auth login)"
    return None


def tenancy(env: Mapping[str, str]) -> str:
    """One line on where the tenant comes from (names only)."""
    set_ = [v for v in TENANCY_VARS if env.get(v, "").strip()]
    if set_:
        return f"dss tenancy: {', '.join(set_)}"
    return "dss tenancy: NVDATASET_TENANTID not set; nvdataset's saved context decides (`nvdataset auth context use`)"


def child_env(env: Mapping[str, str], credential: str | None, hidden: tuple[str, ...] = ()) -> dict[str, str]:
    """``nvdataset``'s environment: no secret-named variable, judge's variable or ``hidden`` one
    (the VLM's key variable) except the chosen credential."""
    return child_environment(env, keep=[credential] if credential in CREDENTIAL_VARS else [], drop=hidden)


def _pump(stream: object, tail: deque[str], echo: Callable[[str], None], masker: Masker) -> None:
    for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
        line = masker.text(raw.decode("utf-8", "replace").rstrip("\n"))
        tail.append(line)
        echo(line)


def download(p: DatasetPlace, credential: str | None, env: Mapping[str, str], *, nvdataset: str = "nvdataset",
             timeout_s: float = DOWNLOAD_TIMEOUT_S, echo: Callable[[str], None] = lambda _s: None,
             masker: Masker | None = None, hidden: tuple[str, ...] = ()) -> None:
    """``nvdataset download <name> <dir>`` in its own session, its output echoed (masked), killed
    with its whole group at ``timeout_s``. Raises :class:`PreconditionError` (not installed) or
    :class:`DownloadError` (it ran and failed) with the hint for what it printed."""
    masker = masker or Masker.from_env(env)
    exe = shutil.which(nvdataset, path=env.get("PATH"))
    if exe is None:
        raise PreconditionError(HINT_NOT_INSTALLED.format(bin=nvdataset))
    p.root.mkdir(parents=True, exist_ok=True)
    argv = [exe, "download", p.name, str(p.root)]
    echo(f"+ {nvdataset} download {p.name} {p.root}")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=child_env(env, credential, hidden), start_new_session=True)
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    reader = threading.Thread(target=_pump, args=(proc.stdout, tail, echo, masker), daemon=True)
    reader.start()
    t0 = time.monotonic()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        reader.join(5)
        raise DownloadError(f"`{nvdataset} download {p.name}` did not finish in {timeout_s:g} s and was killed "
                            "(--download-timeout): a stalled Dataset Service or a slow link; rerun, or raise "
                            "--download-timeout") from None
    reader.join(10)
    text = "\n".join(tail)
    if rc != 0:
        raise DownloadError(failure_hint(rc, text, credential, nvdataset))
    if not p.ready():
        raise DownloadError(f"`{nvdataset} download {p.name}` exited 0 after {time.monotonic() - t0:.0f} s but "
                            f"{p.root} lacks {p.file} or videos/ (see docs/qa.md, 'The dataset contract'); "
                            "check --dataset-file against the files it holds")


def failure_hint(rc: int, output: str, credential: str | None, nvdataset: str = "nvdataset") -> str:
    """The one message for a failed download: the seed's hint when its output says why."""
    if "did not find tenant_id" in output.lower():
        return HINT_TENANT
    if re.search(r"\b403\b|forbidden", output, re.I):
        return HINT_403.format(cred=credential or "no key (a Starfleet login)")
    last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "")
    return f"`{nvdataset} download` failed with exit {rc}" + (f": {last.strip()[:300]}" if last else "")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def prepare(p: DatasetPlace, env: Mapping[str, str], *, skip_download: bool = False, force_download: bool = False,
            nvdataset: str = "nvdataset", timeout_s: float = DOWNLOAD_TIMEOUT_S,
            echo: Callable[[str], None] = lambda _s: None, hidden: tuple[str, ...] = ()) -> None:
    """Make sure the dataset is on disk: use it when ready (or named by VSS_EVAL_DATASET), else
    download it; ``hidden``: variables the download must not see besides the secret-named ones.
    Raises :class:`PreconditionError` (exit 2) or :class:`DownloadError` (exit 3)."""
    if p.from_env or skip_download:
        if not p.ready():
            why = f"{ENV_DATASET}={p.root}" if p.from_env else "--skip-download"
            raise PreconditionError(f"dataset not found at {p.root} ({why}): it needs {p.file} and videos/ "
                                    "(docs/qa.md, 'The dataset contract'); check the path and --dataset-file")
        echo(f"dataset: {p.root} (already extracted)")
        return
    if p.ready() and not force_download:
        echo(f"dataset: {p.root} (downloaded before; --force-download fetches it again)")
        return
    credential = dss_credential(env)
    if credential is None:
        raise PreconditionError(HINT_NO_CREDENTIAL.format(name=p.name))
    echo(f"dss credential: {credential}")
    echo(tenancy(env))
    download(p, credential, env, nvdataset=nvdataset, timeout_s=timeout_s, echo=echo, hidden=hidden)
