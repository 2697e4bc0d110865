"""Run configs: pydantic models loaded from YAML plus dotted CLI overrides.

    cfg = load_config("examples/quickstart.yaml", ["rl.steps=20", "rl.lr=3e-4"])

Precedence, each layer merged deeply over the one before: a preset (a recipe's YAML in
posttrain/recipes/presets, passed as `base`) <- the YAML file <- dotted overrides. So a
YAML `rl: {steps: 10}` over a preset changes rl.steps and keeps the preset's rl.lr. A
YAML value of null deletes that key of the preset (e.g. drop one of a preset's domains
with `tasks: {domains: {ui: null}}`).

Every section forbids unknown keys, so a typo is an error that names the key and the
file, never a silently ignored setting. Numeric ranges are checked here too; the names
of registered components (losses, engines, domains, ...) are checked by
`posttrain.config_check.check_config`, which every command calls before any model work.
Values computed at run time do not live here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrain.errors import ConfigError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TinyModelConfig(Section):
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 256


class TowerPretrainConfig(Section):
    """Self-supervised pretraining of the tiny VLM's tower on the train images; see posttrain/train/tower_pretrain.py."""

    steps: int = Field(default=800, ge=0)  # 0 skips it; a real checkpoint (model.path) always skips it
    batch_size: int = Field(default=128, ge=1)
    lr: float = Field(default=1.0e-3, gt=0.0)
    mask_ratio: float = Field(default=0.5, ge=0.0, lt=1.0)  # share of patches hidden; their pixels must be inferred
    stroke_weight: float = Field(default=4.0, ge=0.0)  # extra weight on pixels unlike their patch's background


class TinyVisionConfig(Section):
    """The tiny VLM's vision tower (SigLIP) and image budget; see posttrain/models/vlm.py."""

    image_size: int = 32  # the processor resizes every image to image_size x image_size
    patch_size: int = 8  # (image_size / patch_size)^2 image tokens per image
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_image_side: int = 1024  # decoded images are shrunk to this long side before processing
    pretrain: TowerPretrainConfig = TowerPretrainConfig()  # before the warm-up, when the run has train images


class ModelConfig(Section):
    path: str | None = None  # an HF causal-LM directory; None builds the tiny default
    tiny: TinyModelConfig = TinyModelConfig()
    vision: TinyVisionConfig | None = None  # set -> the tiny default is a VLM (LLaVA: SigLIP + tiny Llama)
    dtype: str = "float32"


class DomainConfig(Section):
    weight: float = Field(default=1.0, ge=0.0)
    n_train: int = Field(default=2000, ge=0)
    n_eval: int = Field(default=200, ge=0)
    difficulty: float = Field(default=1.0, ge=0.0)
    args: dict[str, Any] = {}


class TasksConfig(Section):
    # Quickstart defaults, tuned for the tiny model on 2 cores (docs/benchmarks.md): operands
    # 6..63 for arithmetic, slopes 2..12 and intercepts 0..59 for code.
    domains: dict[str, DomainConfig] = {
        "arithmetic": DomainConfig(difficulty=0.8, n_train=3000, n_eval=200),
        "code": DomainConfig(difficulty=0.6, n_train=3000, n_eval=150),
    }
    eval_seed: int = 10_000  # held-out split: a disjoint generator seed
    # Fraction of the training tasks whose oracle demonstrations feed the SFT warm-up; RL
    # samples the rest. RL on tasks the SFT just memorised carries no signal for the skill.
    sft_frac: float = Field(default=0.5, ge=0.0, le=1.0)
    files: list[str] = []  # extra task files (JSONL/YAML)


class SFTConfig(Section):
    steps: int = Field(default=600, ge=0)
    lr: float = Field(default=3e-3, gt=0.0)
    batch_size: int = Field(default=64, ge=1)
    warmup_steps: int = Field(default=10, ge=0)
    # Quickstart warm-up only: stop once greedy pass@1 on a validation sample of the RL task
    # pool (never the held-out split), mean over domains, reaches this; None = run all steps.
    stop_at_pass: float | None = Field(default=None, gt=0.0, le=1.0)
    check_every: int = Field(default=50, ge=1)  # SFT steps between validation checks
    val_per_domain: int = Field(default=100, ge=1)  # validation tasks per domain
    weight_decay: float = Field(default=0.0, ge=0.0)
    max_len: int = Field(default=128, ge=2)
    eval_every: int = Field(default=0, ge=0)
    data: str | None = None  # JSONL of chat examples; None -> oracle demonstrations
    pack: bool = False
    eval_data: str | None = None  # JSONL held out for eval loss; None -> eval_frac of `data`
    eval_frac: float = 0.1


class LoraConfig(Section):
    r: int = Field(default=8, ge=1)
    alpha: int = Field(default=16, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = ["q_proj", "v_proj"]


class TrainerConfig(Section):
    """Machinery shared by the sft, dpo and rl recipes (posttrain/train/lora.py applies it)."""

    lora: LoraConfig | None = None  # None -> full fine-tuning
    gradient_checkpointing: bool = False
    grad_accum: int = Field(default=1, ge=1)  # micro-batches per optimizer step
    precision: str = "auto"  # auto -> bf16 autocast where the device has it, else fp32; or fp32 / bf16


class DPOConfig(Section):
    loss: str = "sigmoid"  # a `dpo_loss` registry name: sigmoid | ipo
    beta: float = Field(default=0.1, gt=0.0)
    steps: int = Field(default=100, ge=0)
    lr: float = Field(default=1e-4, gt=0.0)
    batch_size: int = Field(default=16, ge=1)
    max_len: int = Field(default=256, ge=2)
    warmup_steps: int = Field(default=5, ge=0)
    data: str | None = None  # JSONL pairs {prompt|messages, chosen, rejected}
    from_run: str | None = None  # or: build pairs from this run's trajectories.sqlite
    min_reward_gap: float = Field(default=0.5, ge=0.0)
    eval_every: int = Field(default=0, ge=0)
    eval_frac: float = Field(default=0.1, ge=0.0, lt=1.0)


class InfraErrorConfig(Section):
    """rl.infra_error: what an RL run does when too many verifications are infra errors (train/infra_guard.py)."""

    window: int = Field(default=200, ge=1)  # the last N verifications looked at
    threshold: float = Field(default=0.2, gt=0.0, le=1.0)  # infra-error share that trips the guard
    min_samples: int = Field(default=50, ge=1)  # no verdict on fewer verifications
    action: str = Field(default="warn", pattern="^(warn|stop)$")  # warn loudly, or stop the run (one line)


class RLConfig(Section):
    steps: int = Field(default=200, ge=0)
    prompts_per_step: int = Field(default=16, ge=1)
    group_size: int = Field(default=8, ge=1)
    # benchmarks/vs_trl.py: 3e-5..1e-4 lifts both TRL and us; >= 5e-4 collapses both
    lr: float = Field(default=3e-5, gt=0.0)
    warmup_steps: int = Field(default=20, ge=0)  # linear LR warm-up: Adam's first steps are sign-like and large
    loss: str = "dapo"  # a `loss` registry name
    # Extra keyword arguments of the loss (e.g. {clip_eps: 3e-4} for gspo). Clip ranges left
    # unset here and in clip_eps/clip_eps_high take the loss's own defaults.
    loss_args: dict[str, Any] = {}
    advantage: str = "group_norm"  # an `advantage` registry name
    kl_coef: float = Field(default=0.0, ge=0.0)
    kl_estimator: str = "k3"  # a `kl` registry name
    # None -> the loss's own default (dapo 0.2 / 0.28, grpo 0.2 / 0.2, gspo 3e-4 / 4e-4)
    clip_eps: float | None = Field(default=None, gt=0.0)
    clip_eps_high: float | None = Field(default=None, gt=0.0)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(default=24, ge=1)
    update_epochs: int = Field(default=1, ge=1)
    minibatches: int = Field(default=1, ge=1)
    share_prefix: bool = True  # a group's prompt computed once in the update (train/shared_prefix.py)
    dedup_samples: bool = True  # identical samples computed once in the update (exact: gradients sum)
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    format_weight: float = Field(default=0.0, ge=0.0)  # extra reward weight of the format rule (gated anyway)
    eval_every: int = Field(default=0, ge=0)
    checkpoint_every: int = Field(default=10, ge=0)
    keep_checkpoints: int = Field(default=2, ge=1)
    infra_error: InfraErrorConfig = InfraErrorConfig()

    def loss_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the loss: clip ranges that are set, then `loss_args` (wins)."""
        clip = {k: v for k, v in (("clip_eps", self.clip_eps), ("clip_eps_high", self.clip_eps_high)) if v is not None}
        return {**clip, "max_tokens": self.max_new_tokens, **self.loss_args}


class EngineConfig(Section):
    name: str = "fast"  # an `engine` registry name: fast | hf | vllm
    args: dict[str, Any] = {}  # engine keyword arguments, e.g. {max_batch: 256, speculative: ngram}


class SandboxConfig(Section):
    # Per-execution limits come from each task's verifier (e.g. humaneval's wall_s), not from here.
    concurrency: int = Field(default=0, ge=0)  # 0 -> number of cores
    retries: int = Field(default=2, ge=0)


class ScheduleConfig(Section):
    policy: str = "uniform"
    args: dict[str, Any] = {}


class EvalConfig(Section):
    # Held-out pass@1 is one sample per task at this temperature (seeded when > 0); 0 = greedy.
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int = 1234
    max_new_tokens: int = Field(default=24, ge=1)


class AgentConfig(Section):
    """Multi-step episodes (tasks with limits.max_steps > 1): budgets and reward shaping."""

    step_weight: float = 0.1  # bonus * (1 - steps / max_steps), on solved episodes only
    malformed_penalty: float = 0.1  # subtracted per malformed tool call
    obs_max_chars: int = 2000  # observations are truncated to this, with a marker
    token_budget: int = 0  # whole conversation; 0 -> the engine's context
    time_budget_s: float = 0.0  # per episode; 0 -> the task's limits.timeout_s
    concurrency: int = 64  # episodes (and sandbox sessions) alive at once
    retries: int = 1  # re-runs of an episode whose sandbox failed


class ClusterConfig(Section):
    """Ray scale-out (posttrain/distributed): used only when `address` is set."""

    address: str | None = None  # "auto", "127.0.0.1:6379" or "ray://head:10001"; None -> all in-process
    rollout_workers: int = 2  # actors holding `fast` engines
    worker_cpus: float = 1.0  # Ray CPUs (and torch threads) per rollout worker
    staleness: int = 0  # a worker more than this many weight versions behind is refreshed before work
    weight_sync: str = "object_store"  # or "collective": torch.distributed broadcast (needs staleness 0)
    collective_backend: str = "auto"  # auto -> nccl with CUDA, else gloo
    pool_concurrency: int = 0  # sandbox slots per node; 0 -> the node's CPUs
    warm_slots: int = 0  # warm sandbox slots each pool starts before its first request
    start_jitter_s: float = 1.0  # pool start-ups spread over this window
    call_timeout_s: float = 60.0  # every remote call (plus the execution's own wall limit)
    generate_timeout_s: float = 600.0  # one worker's share of a generation batch
    queue_timeout_s: float = 600.0  # global admission wait for a free sandbox slot
    max_resubmits: int = 3  # re-runs of work whose node or actor died
    actor_concurrency: int = 1000  # calls one pool actor serves at once (its pool bounds real work)
    queue_per_slot: int = 2  # executions sent ahead per sandbox slot, queued in the node's pool: no idle round trips
    exec_batch: int = 32  # executions to one node coalesced into one remote call (1 = a call each)
    sandbox_resource: str | None = None  # place pools only on nodes with this custom resource
    rollout_resource: str | None = None  # place rollout workers only on nodes with this custom resource


class RunConfig(Section):
    name: str = "run"
    seed: int = 0
    out_dir: str = "runs"
    model: ModelConfig = ModelConfig()
    tasks: TasksConfig = TasksConfig()
    sft: SFTConfig = SFTConfig()
    rl: RLConfig = RLConfig()
    dpo: DPOConfig = DPOConfig()
    trainer: TrainerConfig = TrainerConfig()
    engine: EngineConfig = EngineConfig()
    sandbox: SandboxConfig = SandboxConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    eval: EvalConfig = EvalConfig()
    cluster: ClusterConfig = ClusterConfig()
    agent: AgentConfig = AgentConfig()
    threads: int = Field(default=0, ge=0, description="torch threads; 0 -> all cores")
    plugins: list[str] = []  # .py files defining extra domains/verifiers/losses, imported before validation


def _set_dotted(tree: dict[str, Any], dotted: str, raw: str, defaults: dict[str, Any] | None = None) -> None:
    """Set one override. A section the tree lacks starts from its default value, so that
    `tasks.domains.code.args.form=shift` edits the default `code` domain and keeps the
    other default domains, instead of replacing the whole `tasks.domains` mapping."""
    keys = dotted.split(".")
    node, dflt = tree, defaults
    for k in keys[:-1]:
        dflt = dflt.get(k) if isinstance(dflt, dict) else None
        if k not in node and isinstance(dflt, dict):
            node[k] = copy.deepcopy(dflt)
        nxt = node.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"override {dotted!r}: {k!r} is not a section")
        node = nxt
    node[keys[-1]] = yaml.safe_load(raw) if raw != "" else ""


def _format_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"unknown config key {key!r} in {source}"
    return f"bad value for config key {key!r} in {source}: {first['msg']}"


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`: mappings merge key by key, anything else replaces;
    a None in `over` deletes that key (how a YAML drops a preset's domain)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_yaml_tree(path: str | Path) -> dict[str, Any]:
    """A config YAML file as a mapping; errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        loaded = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: top level must be a mapping of config sections")
    return loaded


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> RunConfig:
    """Load `base` (a preset) <- YAML (optional) <- `key.sub=value` overrides, deep-merged, then
    validate. Errors name the key and the file."""
    tree: dict[str, Any] = copy.deepcopy(base or {})
    source = "defaults"
    if path is not None:
        source = str(path)
        loaded = read_yaml_tree(path)
        if isinstance(loaded.get("plugins"), list):  # relative to the YAML file, stored absolute: a resume
            loaded["plugins"] = [str((Path(path).parent / p).resolve()) if isinstance(p, str) else p
                                 for p in loaded["plugins"]]  # from another directory finds them
        tree = deep_merge(tree, loaded)
    defaults = RunConfig().model_dump(mode="json") if overrides else None
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"override {ov!r} must look like key.sub=value")
        k, v = ov.split("=", 1)
        _set_dotted(tree, k.strip(), v, defaults)
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as e:
        where = source if not overrides else f"{source} (with overrides {' '.join(overrides)})"
        raise ConfigError(_format_error(e, where)) from None


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
