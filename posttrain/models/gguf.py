"""Convert a GGUF checkpoint into a plain Hugging Face directory (dense safetensors).

    info = inspect_gguf("model.gguf")          # cheap: header, tensor extents, architecture
    manifest = convert_gguf("model.gguf", "out/", progress=print_progress)

The output is what every other loader in posttrain reads (`load_policy`): `config.json`
(no `quantization_config`), `model.safetensors` (dense weights), the tokenizer files, the
chat template when the GGUF has one, `generation_config.json`, and `posttrain-model.json`
(MANIFEST_NAME): sha256 of every file, the GGUF's sha256, the source, the licence.

Everything a user can get wrong is checked before the slow part (dequantising), and each
failure is one `ModelError` line naming the file and the fix: not a GGUF, a truncated file
(`gguf_header.read_header` checks every tensor's byte extent against the file size without
reading the data),
an architecture transformers cannot load, no tokenizer in the file, a non-empty --out.

Limits: the weights are dequantised by transformers (`from_pretrained(gguf_file=...)`), so
the dense model is what the quantised file holds, not the original full-precision model;
it needs about (dense size + GGUF size) of RAM. Per-tensor progress comes from swapping the
`tqdm` that `transformers.modeling_gguf_pytorch_utils` iterates with (a module global, checked
with transformers 5.24; without it the step is reported only when done).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from posttrain.errors import ModelError

MANIFEST_NAME = "posttrain-model.json"
MANIFEST_FORMAT = "posttrain-model/1"
DTYPES = ("float32", "bfloat16", "float16")
_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# GGUF "architectures" in transformers' table that are not causal LMs posttrain can train.
_NOT_CAUSAL_LM = {"general", "tokenizer", "t5", "umt5", "t5encoder"}

# progress(phase, step, total): total is None while the length of a phase is unknown.
Progress = Callable[[str, int, Optional[int]], None]


def _no_progress(phase: str, step: int, total: Optional[int]) -> None:
    return None


@dataclass(frozen=True)
class GGUFInfo:
    """What the header of a GGUF says; nothing here needed the tensor data."""

    path: Path
    size_bytes: int
    architecture: str
    name: str
    license: Optional[str]
    tokenizer_model: Optional[str]
    chat_template: Optional[str]
    n_tensors: int
    n_parameters: int
    tensor_types: dict[str, int] = field(default_factory=dict)  # ggml type name -> tensor count
    context_length: Optional[int] = None

    def dense_bytes(self, dtype: str = "float32") -> int:
        return self.n_parameters * _DTYPE_BYTES[dtype]


def supported_architectures() -> list[str]:
    """GGUF architectures transformers can load into a causal LM (the installed version's table)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in _NOT_CAUSAL_LM)


def _supported_tokenizers() -> set[str]:
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_TYPES
    except ImportError:  # an older layout: let transformers decide at load time
        return set()
    return set(GGUF_TOKENIZER_TYPES) - {"t5"}


def _require_gguf_package() -> Any:
    try:
        import gguf
    except ImportError:
        raise ModelError("reading GGUF files needs the `gguf` package: "
                         "pip install --no-deps gguf==0.19.0 (or `make models`)") from None
    return gguf


def inspect_gguf(path: str | Path) -> GGUFInfo:
    """Check a GGUF without loading it: magic, header, every tensor inside the file, architecture,
    tokenizer. ModelError (one line: the file, what is wrong, the fix) on any failure."""
    from posttrain.models.gguf_header import ArrayInfo, GGUFHeaderError, read_header

    p = Path(path)
    if not p.is_file():
        raise ModelError(f"GGUF file not found: {p}")
    size = p.stat().st_size
    with p.open("rb") as fh:
        head = fh.read(4)
    if head != b"GGUF":
        raise ModelError(f"{p} is not a GGUF file (first bytes {head!r}, expected b'GGUF'); "
                         f"pass a .gguf checkpoint such as llama.cpp writes")
    gguf = _require_gguf_package()
    try:
        h = read_header(p, {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()})
    except GGUFHeaderError as e:
        raise ModelError(f"{p} is truncated or corrupt: {e}; download or copy it again") from None
    if not h.tensors:
        raise ModelError(f"{p} holds no tensors; it is not a model checkpoint")
    last = max(h.tensors, key=lambda t: t.end)
    if last.end > size:
        raise ModelError(f"{p} is truncated: tensor {last.name!r} ends at byte {last.end} but the file has {size} "
                         f"bytes ({last.end - size} missing); download or copy it again")

    f = h.fields
    arch = str(f.get("general.architecture") or "")
    supported = supported_architectures()
    if arch not in supported:
        raise ModelError(f"{p}: GGUF architecture {arch or '(none)'!r} is not supported; transformers "
                         f"can load: {', '.join(supported)}")
    tok_model = f.get("tokenizer.ggml.model")
    if tok_model is None or "tokenizer.ggml.tokens" not in f:
        raise ModelError(f"{p} has no tokenizer (no tokenizer.ggml.model/tokens); convert a GGUF that embeds "
                         f"its vocabulary (llama.cpp's convert_hf_to_gguf.py writes one)")
    known = _supported_tokenizers()
    if known and str(tok_model) not in known:
        raise ModelError(f"{p}: GGUF tokenizer type {tok_model!r} is not supported; known: {', '.join(sorted(known))}")
    types: dict[str, int] = {}
    for t in h.tensors:
        name = gguf.GGMLQuantizationType(t.ggml_type).name
        types[name] = types.get(name, 0) + 1
    ctx = f.get(f"{arch}.context_length")
    template = f.get("tokenizer.chat_template")
    return GGUFInfo(path=p, size_bytes=size, architecture=arch, name=str(f.get("general.name") or p.stem),
                    license=f.get("general.license") if isinstance(f.get("general.license"), str) else None,
                    tokenizer_model=str(tok_model), chat_template=template if isinstance(template, str) else None,
                    n_tensors=len(h.tensors), n_parameters=sum(t.n_elements for t in h.tensors), tensor_types=types,
                    context_length=int(ctx) if isinstance(ctx, int) and not isinstance(ctx, ArrayInfo) else None)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def check_out_dir(out: str | Path, overwrite: bool) -> Path:
    """Refuse a non-empty --out unless --overwrite; even then, only replace a model directory."""
    o = Path(out)
    if o.exists() and not o.is_dir():
        raise ModelError(f"--out {o} is a file, not a directory; choose a directory path")
    if o.is_dir() and any(o.iterdir()):
        if not overwrite:
            raise ModelError(f"--out {o} is not empty; choose a new directory or pass --overwrite to replace it")
        if not ((o / "config.json").is_file() or (o / MANIFEST_NAME).is_file()):
            raise ModelError(f"--out {o} is not empty and is not a model directory (no config.json); "
                             f"refusing to delete it even with --overwrite")
    return o


@contextlib.contextmanager
def _quiet_transformers(progress: Progress) -> Iterator[None]:
    """HF's own progress bars and warnings off; the GGUF dequantise loop reports to `progress`."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    original_tqdm = getattr(gguf_utils, "tqdm", None)

    def counted(iterable: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        items = list(iterable)
        for i, item in enumerate(items):
            progress("dequantise", i, len(items))
            yield item
        progress("dequantise", len(items), len(items))

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if original_tqdm is not None:
        gguf_utils.tqdm = counted
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if original_tqdm is not None:
            gguf_utils.tqdm = original_tqdm
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _dequantise_kwargs(gguf_file: str) -> dict:
    """Ask for dense weights explicitly: with the `kernels` package installed, transformers >= 5.2x
    would otherwise keep the weights in their GGUF blocks (a quantised model we could not save)."""
    try:
        from transformers.utils.quantization_config import GgufConfig
    except ImportError:  # older transformers always dequantise
        return {}
    return {"quantization_config": GgufConfig(gguf_file=gguf_file, dequantize=True)}


def _load_dense(info: GGUFInfo, dtype: str, progress: Progress) -> tuple[Any, Any]:
    """(model, tokenizer) dequantised from the GGUF, loaded from a private directory holding
    only a link to it, so stray config or tokenizer files next to the GGUF are never read."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="posttrain-gguf-") as d, _quiet_transformers(progress):
        link = Path(d) / "model.gguf"
        link.symlink_to(info.path.resolve())
        try:
            progress("tokenizer", 0, None)
            tok = AutoTokenizer.from_pretrained(d, gguf_file=link.name)
            progress("tokenizer", 1, 1)
            model = AutoModelForCausalLM.from_pretrained(d, gguf_file=link.name, dtype=getattr(torch, dtype),
                                                         **_dequantise_kwargs(link.name))
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise ModelError(f"transformers cannot load {info.path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    kept = sorted({str(p.dtype) for p in model.parameters()} - {str(getattr(torch, dtype))})
    if kept:
        raise ModelError(f"{info.path}: transformers kept weights as {', '.join(kept)} instead of dense {dtype}; "
                         f"this transformers version cannot dequantise the file")
    if getattr(model, "hf_quantizer", None) is not None:
        # save_pretrained refuses a model "quantized with gguf"; the weights are dense already.
        model.hf_quantizer.remove_quantization_config(model)
    if getattr(model.config, "quantization_config", None) is not None:
        raise ModelError(f"{info.path}: the loaded model still carries a quantization_config; "
                         f"this transformers version cannot write it as a dense checkpoint")
    return model, tok


def _write_generation_config(model: Any, out: Path) -> None:
    if (out / "generation_config.json").is_file():
        return
    from transformers import GenerationConfig

    c = model.config
    GenerationConfig(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id,
                     pad_token_id=getattr(c, "pad_token_id", None)).save_pretrained(out)


def file_hashes(d: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {sha256, bytes}} for every file under `d` except the manifest itself."""
    return {str(f.relative_to(d)): {"sha256": sha256_file(f), "bytes": f.stat().st_size}
            for f in sorted(d.rglob("*")) if f.is_file() and f.name != MANIFEST_NAME}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("transformers", "torch", "gguf", "posttrain"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _default_modes(d: Path) -> None:
    """mkdtemp makes the directory 0700 and safetensors writes 0600: give the result the
    modes a plain `mkdir`/`open` would (umask applied), so other users can read the model."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(d, 0o777 & ~umask)
    for f in d.rglob("*"):
        os.chmod(f, (0o777 if f.is_dir() else 0o666) & ~umask)


def _install(staging: Path, out: Path) -> None:
    """Move the finished staging directory to `out`, replacing what check_out_dir allowed."""
    old = None
    if out.is_dir():
        if any(out.iterdir()):
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
        else:
            out.rmdir()
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old)


def convert_gguf(path: str | Path, out: str | Path, *, overwrite: bool = False, dtype: str = "float32",
                 source: Optional[dict] = None, progress: Progress = _no_progress) -> dict:
    """Write the dense HF directory for a GGUF to `out`; returns the manifest (also written as
    MANIFEST_NAME). `source` describes where the GGUF came from (package, version, licence);
    the directory appears only when complete (written next to `out`, then renamed)."""
    if dtype not in DTYPES:
        raise ModelError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    o = check_out_dir(out, overwrite)
    t0 = time.perf_counter()
    progress("inspect", 0, None)
    info = inspect_gguf(path)
    parent = o.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    need = info.dense_bytes(dtype) + (64 << 20)
    free = shutil.disk_usage(parent).free
    if free < need:
        raise ModelError(f"not enough disk for {o}: the dense {dtype} model needs ~{need >> 20} MiB, "
                         f"{free >> 20} MiB free in {parent}")
    progress("inspect", 1, 1)
    timings = {"inspect_s": time.perf_counter() - t0}

    t = time.perf_counter()
    model, tok = _load_dense(info, dtype, progress)
    timings["load_dequantise_s"] = time.perf_counter() - t

    staging = Path(tempfile.mkdtemp(prefix=f".{o.name}.partial-", dir=parent))
    try:
        t = time.perf_counter()
        progress("save", 0, 3)
        with _quiet_transformers(progress):
            model.save_pretrained(staging)
            progress("save", 1, 3)
            tok.save_pretrained(staging)
            _write_generation_config(model, staging)
        progress("save", 2, 3)
        timings["save_s"] = time.perf_counter() - t
        has_template = info.chat_template is not None
        from posttrain.models.model_dir import check_model_dir

        check_model_dir(staging, need_chat_template=has_template)
        t = time.perf_counter()
        src = dict(source or {"kind": "file"})
        src.update(gguf=info.path.name, gguf_sha256=sha256_file(info.path), gguf_bytes=info.size_bytes)
        manifest = {
            "format": MANIFEST_FORMAT,
            "name": src.get("name", info.name),
            "architecture": info.architecture,
            "model_type": model.config.model_type,
            "parameters": sum(p.numel() for p in model.parameters()),
            "dtype": dtype,
            "license": src.get("license") or info.license or "unknown (the GGUF does not state one)",
            "chat_template": ({"present": True} if has_template else
                              {"present": False, "reason": "the GGUF has no tokenizer.chat_template "
                                                           "(a base model): prompt it with plain text"}),
            "context_length": info.context_length,
            "quantisation_in_source": info.tensor_types,
            "source": src,
            "converted_with": _versions(),
            "files": file_hashes(staging),
        }
        timings["hash_s"] = time.perf_counter() - t
        manifest["timings_s"] = {k: round(v, 2) for k, v in timings.items()}
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
        _default_modes(staging)
        progress("save", 3, 3)
        _install(staging, o)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def verify_manifest(d: str | Path) -> list[str]:
    """Files whose sha256 or size no longer matches the manifest (empty list: all intact)."""
    p = Path(d)
    m = json.loads((p / MANIFEST_NAME).read_text())
    now = file_hashes(p)
    return sorted(k for k in set(m["files"]) | set(now) if m["files"].get(k) != now.get(k))
