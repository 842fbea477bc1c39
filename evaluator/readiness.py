"""Whether this machine can be the evaluation runner: each check passed or failed, with the fix.

`tinyrouter runner check` prints them; the evaluation job runs it first. The sandbox comes
first and the sealed files are decrypted only once it holds (nothing secret is read before).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluator import isolation
from evaluator.errors import TinyRouterError
from evaluator.rules import ENCODER_REVISIONS, Competition

MIN_AVAILABLE_MEMORY_GB = 8  # the encoder on the host while it moves to the GPU, and grading
CUDA_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"


@dataclass(frozen=True)
class Finding:
    """One line of the check: `ok` None when it could not be tried (then `detail` says why)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {True: "pass", False: "FAIL", None: "skip"}[self.ok]
        text = f"{mark:<4}  {self.name}: {self.detail}"
        return text + (f"\n      fix: {self.fix}" if self.ok is not True and self.fix else "")


@dataclass(frozen=True)
class Setup:
    """Where this runner keeps what the evaluation needs."""

    rules: Competition
    benchmark_dir: Path | None = None
    manifest: Path | None = None
    pool_url: str | None = None


def check_sandbox(setup: Setup) -> list[Finding]:
    found = isolation.verified()
    if found.failure:
        return [Finding("sandbox", False, found.failure, found.fix)]
    lines = [Finding(f"sandbox: {check.name}", check.held, check.detail or "held", found.fix)
             for check in found.checks]
    return [Finding("sandbox", found.in_force, found.describe(), found.fix), *lines]


def check_cuda(setup: Setup) -> list[Finding]:
    try:
        import torch
    except ModuleNotFoundError:
        return [Finding("cuda", False, "torch is not installed",
                        f"{CUDA_TORCH}, then pip install 'tinyrouter[model]'")]
    if not torch.cuda.is_available():
        build = torch.version.cuda or "a CPU-only build"
        return [Finding("cuda", False, f"torch {torch.__version__} ({build}) sees no CUDA device",
                        f"install the NVIDIA driver and a CUDA build of torch ({CUDA_TORCH})")]
    name = torch.cuda.get_device_name(0)
    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    ok = torch.cuda.is_bf16_supported()
    return [Finding("cuda", ok, f"torch {torch.__version__}, CUDA {torch.version.cuda}, {name} "
                                f"({gib:.0f} GiB){'' if ok else ', no bf16'}",
                    "the encoder runs in bf16: use an Ampere or newer GPU")]


def check_encoder(setup: Setup) -> list[Finding]:
    """The encoder loaded as an evaluation loads it, not only found: a folder or a cached
    snapshot is no use without the model extra to read it."""
    encoder = setup.rules.encoder_id
    install = "pip install 'tinyrouter[model]' (and CUDA torch, as under cuda)"
    for module in ("torch", "transformers"):
        try:
            __import__(module)
        except ImportError:
            return [Finding("encoder", False, f"{encoder} cannot load: {module} is not "
                                              "installed", install)]
    where = encoder
    if not Path(encoder).is_dir():
        revision = ENCODER_REVISIONS.get(encoder)
        if revision is None:
            return [Finding("encoder", False, f"{encoder} has no pinned revision",
                            "use the official encoder or a local folder")]
        fetch = (f"python -c \"from huggingface_hub import snapshot_download; "
                 f"snapshot_download('{encoder}', revision='{revision}')\"")
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(encoder, revision=revision, local_files_only=True)
        except Exception as exc:  # the hub client raises several kinds for "not in the cache"
            return [Finding("encoder", False, f"{encoder}@{revision[:12]} is not in the local "
                                              f"cache ({type(exc).__name__})", fetch)]
        where = f"{encoder}@{revision[:12]}"
    from evaluator.coordinator.encoder import load_encoder

    try:
        loaded = load_encoder(encoder, setup.rules)
    except TinyRouterError as exc:
        return [Finding("encoder", False, str(exc), "download it again, or fix the folder")]
    config = loaded.config
    return [Finding("encoder", True, f"{where} loads ({config.num_hidden_layers} layers, hidden "
                                     f"size {config.hidden_size})")]


def check_resources(setup: Setup) -> list[Finding]:
    places = [p for p in (setup.benchmark_dir, _hub_cache()) if p is not None]
    findings = []
    for place in dict.fromkeys(places):
        existing = next((p for p in (place, *place.parents) if p.exists()), Path("/"))
        free = shutil.disk_usage(existing).free / 2**30
        needs = setup.rules.runner_free_disk_gib
        findings.append(Finding(f"disk at {place}", free >= needs,
                                f"{free:.0f} GiB free (needs {needs})",
                                "free space there or point HF_HOME elsewhere"))
    available = _available_memory_gib()
    findings.append(Finding("memory", None if available is None else
                            available >= MIN_AVAILABLE_MEMORY_GB,
                            "unknown (no /proc/meminfo)" if available is None else
                            f"{available:.0f} GiB available (needs {MIN_AVAILABLE_MEMORY_GB})",
                            "stop other work on the runner, or give it more memory"))
    return findings


def check_sealed(setup: Setup) -> list[Finding]:
    from evaluator.benchmarks.sealing import DIR_ENV, load_manifest, verify_benchmark
    from evaluator.benchmarks.sealing import password_from_env as password

    if setup.benchmark_dir is None or setup.manifest is None:
        return [Finding("sealed files", False, "no sealed benchmark given",
                        f"pass --benchmark-dir (or set {DIR_ENV}) and --repo")]
    if not isolation.verified().in_force:
        return [Finding("sealed files", None, "not decrypted: the sandbox must hold first",
                        "fix the sandbox above")]
    try:
        counts = verify_benchmark(setup.benchmark_dir, password(), load_manifest(setup.manifest),
                                  setup.rules)
    except TinyRouterError as exc:
        return [Finding("sealed files", False, str(exc),
                        "set BENCHMARK_PASSWORD and copy the sealed files the manifest names")]
    total = sum(n for splits in counts.values() for n in splits.values())
    return [Finding("sealed files", True, f"{len(counts)} benchmarks, {total} items match "
                                          f"{setup.manifest}")]


def check_pool(setup: Setup) -> list[Finding]:
    from evaluator.pool.check import check_pool as call_each

    try:
        checks = asyncio.run(call_each(setup.rules, setup.pool_url))
    except TinyRouterError as exc:
        return [Finding("pool", False, str(exc), "set OPENROUTER_API_KEY (the runner's secret)")]
    return [Finding(f"pool: {c.model}", c.ok, c.problem or f"{c.slug} answered in {c.seconds} s",
                    "see `tinyrouter pool check`; top up the key or fix the model slug")
            for c in checks]


CHECKS: dict[str, Callable[[Setup], list[Finding]]] = {
    "sandbox": check_sandbox, "cuda": check_cuda, "encoder": check_encoder,
    "resources": check_resources, "sealed": check_sealed, "pool": check_pool,
}


def run_checks(setup: Setup, only: list[str] | None = None) -> list[Finding]:
    return [finding for name, check in CHECKS.items() if not only or name in only
            for finding in check(setup)]


def _hub_cache() -> Path:
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "huggingface")
    return Path(home)


def _available_memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None
