"""The run-config schema: one pydantic section per part of a run, each forbidding unknown keys.

posttrain/config.py loads YAML and dotted overrides into `RunConfig` and re-exports every
section, so `from posttrain.config import RLConfig` keeps working; the loader lives there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from typing_extensions import Annotated

from posttrain.config_components import (
    ENGINE_RESERVED,
    Component,
    Registered,
    Section,
    move_legacy_component_keys,
    named,
)


class OptimConfig(Section):
    """One trainer's optimizer and LR schedule (posttrain/train/optim.py builds both). Each phase
    has its own (`rl.optim`, `sft.optim`, `dpo.optim`) with its own defaults (OPTIM_DEFAULTS): a
    partial section (`rl.optim.lr=1e-4`) keeps the phase's other defaults."""

    name: Literal["adamw"] = "adamw"
    lr: float = Field(default=1e-4, gt=0.0)
    betas: tuple[Annotated[float, Field(ge=0.0, lt=1.0)], Annotated[float, Field(ge=0.0, lt=1.0)]] = (0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0.0)
    weight_decay: float = Field(default=0.0, ge=0.0)
    schedule: Literal["constant", "cosine"] = "constant"  # after the warm-up: flat, or cosine down to 10% of lr
    warmup: int = Field(default=0, ge=0)  # steps of linear warm-up from lr/warmup to lr


# Each phase's optimizer defaults. RL keeps betas (0.9, 0.99), the values every recorded RL result
# was measured with (docs/training.md "Optimizer"); SFT and DPO keep torch's (0.9, 0.999), and DPO
# torch AdamW's default weight decay 0.01, which its one-process loop always had.
OPTIM_DEFAULTS: dict[str, dict[str, Any]] = {
    "rl": {"lr": 3e-5, "betas": (0.9, 0.99), "schedule": "constant", "warmup": 20},
    "sft": {"lr": 3e-3, "betas": (0.9, 0.999), "schedule": "cosine", "warmup": 10},
    "dpo": {"lr": 1e-4, "betas": (0.9, 0.999), "weight_decay": 0.01, "schedule": "cosine", "warmup": 5},
}
# The keys before `optim` existed, still read (config.py renames them in YAML trees and overrides).
LEGACY_OPTIM_KEYS: dict[str, dict[str, str]] = {
    "rl": {"lr": "lr", "warmup_steps": "warmup"},
    "sft": {"lr": "lr", "warmup_steps": "warmup", "weight_decay": "weight_decay"},
    "dpo": {"lr": "lr", "warmup_steps": "warmup"},
}


def _phase_optim(phase: str) -> Any:
    """The `optim` field of `phase`: a given mapping is laid over the phase's defaults."""
    def merge(v: Any) -> Any:
        if isinstance(v, OptimConfig):
            return v
        return {**OPTIM_DEFAULTS[phase], **(v or {})} if isinstance(v, dict) else v
    return Field(default_factory=lambda: OptimConfig(**OPTIM_DEFAULTS[phase])), BeforeValidator(merge)


def move_legacy_optim_keys(phase: str, data: Any) -> Any:
    """`rl.lr` -> `rl.optim.lr` (and the other LEGACY_OPTIM_KEYS) in one section's raw mapping;
    a key given both ways with different values is an error naming both."""
    if not isinstance(data, dict) or not any(k in data for k in LEGACY_OPTIM_KEYS[phase]):
        return data
    data, optim = dict(data), dict(data.get("optim") or {})
    for old, new in LEGACY_OPTIM_KEYS[phase].items():
        if old in data:
            value = data.pop(old)
            if new in optim and optim[new] != value:
                raise ValueError(f"{phase}.{old}={value!r} and {phase}.optim.{new}={optim[new]!r} disagree; "
                                 f"set {phase}.optim.{new} only")
            optim[new] = value
    data["optim"] = optim
    return data


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
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # the policy's weights as loaded (models/io.py)


class DomainConfig(Section):
    weight: float = Field(default=1.0, ge=0.0)
    n_train: int = Field(default=2000, ge=0)
    n_eval: int = Field(default=200, ge=0)
    difficulty: float = Field(default=1.0, ge=0.0)
    args: dict[str, Any] = {}
    held_out: bool = False  # never trained on: only its n_eval held-out tasks, reported apart (transfer)


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
    files: list[str] = []  # extra task files (JSONL/YAML): training tasks
    # Held-out task files (JSONL/YAML): a fixed held-out split served from files, evaluated beside the
    # domains' generated held-out tasks; an id shared with any training task is refused (tasks/splits.py).
    heldout_files: list[str] = []
    # The format rule of file tasks that name none (task metadata.answer_format wins): line | text | code |
    # long; None -> chosen from the task's verifiers (a one-step task with a plain verifier: one line).
    answer_format: Literal["line", "text", "code", "long"] | None = None


class SFTConfig(Section):
    steps: int = Field(default=600, ge=0)
    optim: Annotated[OptimConfig, *_phase_optim("sft")]  # lr 3e-3, cosine, 10 warm-up steps (was sft.lr, ...)
    batch_size: int = Field(default=64, ge=1)
    # Quickstart warm-up only: stop once greedy pass@1 on a validation sample of the RL task
    # pool (never the held-out split), mean over domains, reaches this; None = run all steps.
    stop_at_pass: float | None = Field(default=None, gt=0.0, le=1.0)
    check_every: int = Field(default=50, ge=1)  # SFT steps between validation checks
    val_per_domain: int = Field(default=100, ge=1)  # validation tasks per domain
    max_len: int = Field(default=128, ge=2)
    eval_every: int = Field(default=0, ge=0)
    checkpoint_every: int = Field(default=50, ge=0)  # `posttrain sft` checkpoints (0: only on Ctrl-C and at the end)
    data: str | None = None  # JSONL of chat examples; None -> oracle demonstrations
    pack: bool = False
    eval_data: str | None = None  # JSONL held out for eval loss; None -> eval_frac of `data`
    eval_frac: float = 0.1

    @model_validator(mode="before")
    @classmethod
    def _legacy_optim_keys(cls, data: Any) -> Any:
        return move_legacy_optim_keys("sft", data)


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
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto -> bf16 autocast where the device has it, else fp32; or fp32 / bf16
    # Sharded training (posttrain/train/sharded): N ranks, FSDP2 over dp = world_size / tp, TP over tp.
    world_size: int = Field(default=1, ge=1)  # > 1: the command runs as N processes (or under torchrun)
    tp: int = Field(default=1, ge=1)  # tensor-parallel degree; must divide world_size and the model's heads
    timeout_s: float = Field(default=300.0, gt=0.0)  # every collective and every rank's heartbeat
    mixed_precision: Literal["auto", "bf16", "fp32"] = "auto"  # FSDP2 policy; auto: bf16 on CUDA only
    sync_bucket_mb: float = Field(default=64.0, gt=0.0)  # weight sync from the ranks: the most rank 0 holds at once
    launcher: Literal["local", "ray"] = "local"  # wired by the CLI (cli/main.py): local (N processes here) | ray (ranks 1..N-1 as actors on cluster.address)
    rank_cpus: float = Field(default=1.0, gt=0.0)  # launcher=ray: CPUs (and torch threads) per rank actor
    rank_gpus: float = Field(default=0.0, ge=0.0)  # launcher=ray: GPUs per rank actor


class DPOConfig(Section):
    loss: Annotated[Component, *named("dpo_loss", "sigmoid", reserved=("pc", "pr", "rc", "rr", "nc", "nr", "beta"))]  # sigmoid | ipo
    beta: float = Field(default=0.1, gt=0.0)
    steps: int = Field(default=100, ge=0)
    optim: Annotated[OptimConfig, *_phase_optim("dpo")]  # lr 1e-4, cosine, 5 warm-up steps (was dpo.lr, ...)
    batch_size: int = Field(default=16, ge=1)
    max_len: int = Field(default=256, ge=2)
    data: str | None = None  # JSONL pairs {prompt|messages, chosen, rejected}
    from_run: str | None = None  # or: build pairs from this run's trajectories.sqlite
    min_reward_gap: float = Field(default=0.5, ge=0.0)
    eval_every: int = Field(default=0, ge=0)
    eval_frac: float = Field(default=0.1, ge=0.0, lt=1.0)
    checkpoint_every: int = Field(default=50, ge=0)  # `posttrain dpo` checkpoints (0: only on Ctrl-C and at the end)

    @model_validator(mode="before")
    @classmethod
    def _legacy_optim_keys(cls, data: Any) -> Any:
        return move_legacy_optim_keys("dpo", data)


class InfraErrorConfig(Section):
    """rl.infra_error: what an RL run does when too many verifications are infra errors (train/infra_guard.py)."""

    window: int = Field(default=200, ge=1)  # the last N verifications looked at
    threshold: float = Field(default=0.2, gt=0.0, le=1.0)  # infra-error share that trips the guard
    min_samples: int = Field(default=50, ge=1)  # no verdict on fewer verifications
    action: Literal["warn", "stop"] = "warn"  # warn loudly, or stop the run (one line)


class OffPolicyConfig(Component):
    """rl.offpolicy: the correction for samples generated by older weights (train/offpolicy.py); used when rl.max_staleness > 0."""

    name: str = "tis"  # an `offpolicy` registry name: none | tis | mis | icepop
    args: dict[str, Any] = {}  # the correction's keyword arguments, e.g. {cap: 2.0} for tis, {low: 0.5, high: 2.0} for icepop
    max_kl: float = Field(default=0.5, gt=0.0)  # trainer-vs-behaviour KL estimate that trips the guard
    action: Literal["warn", "stop"] = "warn"  # warn once per window, or stop the run (one line)


class LongTailConfig(Section):
    """rl.longtail: slow tasks in their own queue, so they never stall a step (train/longtail_source.py
    over schedule/longtail.py LongTailRunner); their results join a later step or are counted dropped."""

    enabled: bool = False
    max_staleness: int = Field(default=2, ge=0)  # a late result more than this many versions old is dropped (counted)
    short_concurrency: int = Field(default=0, ge=0)  # groups running at once in the short lane; 0 = rl.prompts_per_step
    long_concurrency: int = Field(default=2, ge=1)  # the long lane's budget
    long_factor: float = Field(default=3.0, gt=1.0)  # long = this many times the median group duration
    long_threshold_s: float | None = Field(default=None, gt=0.0)  # or an absolute threshold (seconds)
    timeout_s: float = Field(default=600.0, gt=0.0)  # a group (generate + verify) cut after this long is counted failed


class OverlongConfig(Component):
    """rl.overlong: what a completion cut off by the token budget (rl.max_new_tokens) scores (verifiers/overlong.py).

    gate: fails the format rule, reward 0, the verifier never runs (the default). score: verified as
    is. soft_penalty: verified as is, plus DAPO's soft overlong punishment, linear from 0 at
    `max_new_tokens - cache` tokens to -factor at the budget (args: {cache: N, factor: 1.0})."""

    name: str = "gate"  # an `overlong` registry name: gate | score | soft_penalty
    args: dict[str, Any] = {}


class RLConfig(Section):
    steps: int = Field(default=200, ge=0)
    prompts_per_step: int = Field(default=16, ge=1)
    group_size: int = Field(default=8, ge=1)
    # lr 3e-5 (benchmarks/vs_trl.py: 3e-5..1e-4 lifts both TRL and us; >= 5e-4 collapses both), betas
    # (0.9, 0.99), constant after 20 warm-up steps (Adam's first steps are sign-like and large). Was rl.lr, rl.warmup_steps.
    optim: Annotated[OptimConfig, *_phase_optim("rl")]
    # A `loss` registry name and its extra keyword arguments (e.g. {name: gspo, args: {clip_eps: 3e-4}}; was
    # rl.loss + rl.loss_args). Clip ranges left unset here and in clip_eps/clip_eps_high take the loss's own defaults.
    loss: Annotated[Component, *named("loss", "dapo")]
    # An `advantage` registry name; its args go to the estimator after (rewards, mask).
    advantage: Annotated[Component, *named("advantage", "group_norm", reserved=("rewards", "mask"))]
    kl_coef: float = Field(default=0.0, ge=0.0)
    kl_estimator: Annotated[Component, *named("kl", "k3", reserved=("logp", "ref_logp"))]  # k1 | k2 | k3
    # None -> the loss's own default (dapo 0.2 / 0.28, grpo 0.2 / 0.2, gspo 3e-4 / 4e-4)
    clip_eps: float | None = Field(default=None, gt=0.0)
    clip_eps_high: float | None = Field(default=None, gt=0.0)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(default=24, ge=1)
    # 0: no limit. N: training tasks whose chat-templated prompt is over N tokens are left out of
    # RL when the splits are built (verl's filter_overlong_prompts), named in the run's progress and
    # summary; the held-out split keeps them. One 2,591-token IFBench prompt made a SmolLM2 step 6x
    # as long as the others (docs/benchmarks.md, "Real models").
    max_prompt_tokens: int = Field(default=0, ge=0)
    update_epochs: int = Field(default=1, ge=1)
    minibatches: int = Field(default=1, ge=1)
    # 0: a minibatch's forward and backward run at once. N: in micro-batches of about N tokens (a
    # group's prompt counted once), gradients accumulated: the same update for the built-in losses,
    # activation memory for N tokens instead of the minibatch's (train/update.py).
    micro_tokens: int = Field(default=0, ge=0)
    share_prefix: bool = True  # a group's prompt computed once in the update (train/shared_prefix.py)
    prefix_layout: Literal["auto", "kv", "dense", "varlen"] = "auto"  # train/prefix_kv.py: kv ~ G*L, dense ~ its square; varlen: one pass (train/varlen.py)
    dedup_samples: bool = True  # identical samples computed once in the update (exact: gradients sum)
    # The behaviour policy's logprobs in the loss's ratio (issue 38): engine = the rollout engine's
    # own (exact only for fp32 rollouts); recompute = the trainer's fp32 forward at the rollout weights
    # (verl's old-log-prob recompute; fused into the update's forward when there is one minibatch and
    # one epoch), which bf16 rollouts (engine.args.matmul_dtype: bfloat16 | auto) require.
    old_logprobs: Literal["engine", "recompute"] = "engine"
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    format_weight: float = Field(default=0.0, ge=0.0)  # extra reward weight of the format rule (gated anyway)
    overlong: Annotated[OverlongConfig, Registered("overlong", reserved=("budget",))] = OverlongConfig()  # truncated completions: gate | score | soft_penalty
    # The token-mean loss's denominator (train/loss_norm.py), for token-level losses (dapo, cispo):
    # kept_tokens: the tokens of the groups kept after zero-variance filtering (the default);
    # all_tokens: every scored sample's tokens, dropped groups included (TRL's GRPOTrainer);
    # constant: samples x rl.max_new_tokens, dropped groups included (Dr. GRPO).
    loss_norm: Literal["kept_tokens", "all_tokens", "constant"] = "kept_tokens"
    eval_every: int = Field(default=0, ge=0)
    checkpoint_every: int = Field(default=10, ge=0)
    keep_checkpoints: int = Field(default=2, ge=1)
    infra_error: InfraErrorConfig = InfraErrorConfig()
    # Asynchronous RL (train/async_rl/, docs/async_rl.md): batch s is generated with weights version
    # v(s) - K while the trainer runs ahead; 0 = the synchronous loop, unchanged.
    max_staleness: int = Field(default=0, ge=0)
    partial_rollouts: bool = False  # a sequence in flight continues under new weights (needs an engine that can)
    offpolicy: Annotated[OffPolicyConfig, Registered("offpolicy")] = OffPolicyConfig()
    # Staleness-aware step size (K >= 1; train/async_rl/source.py STALE_LR): "inverse" multiplies each
    # update's lr by 1 / (1 + a), a = the mean age in versions of the tokens it trains on (staleness-aware
    # async SGD), so a gradient from older weights takes a smaller step; "none" keeps rl.lr. Adam is
    # invariant to the loss's scale, so it is the lr that must shrink, not the loss.
    stale_lr: Literal["inverse", "none"] = "inverse"
    # Zero-variance refill (DAPO dynamic sampling; train/batch_source.py, schedule/filtering.fill_batch):
    # groups whose rewards are all equal carry no gradient; up to N more rounds of fresh prompts replace
    # them until prompts_per_step groups carry signal (extra rollouts: refill/* in the metrics). 0 = off.
    refill_rounds: int = Field(default=0, ge=0)
    longtail: LongTailConfig = LongTailConfig()

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return move_legacy_component_keys("rl", move_legacy_optim_keys("rl", data))

    def loss_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the loss: clip ranges that are set, then `loss.args` (wins)."""
        clip = {k: v for k, v in (("clip_eps", self.clip_eps), ("clip_eps_high", self.clip_eps_high)) if v is not None}
        return {**clip, "max_tokens": self.max_new_tokens, **self.loss.args}


class EngineConfig(Component):
    name: str = "fast"  # an `engine` registry name: fast | hf | vllm
    args: dict[str, Any] = {}  # engine keyword arguments, e.g. {max_batch: 256, speculative: ngram}


class SandboxConfig(Section):
    # Per-execution limits come from each task's verifier (e.g. humaneval's wall_s), not from here.
    concurrency: int = Field(default=0, ge=0)  # 0 -> number of cores
    retries: int = Field(default=2, ge=0)


class CurriculumConfig(Section):
    """Per-domain difficulty that follows the model (schedule/curriculum.py, docs/scheduler.md)."""

    levels: list[float] = [1.0, 2.0, 3.0, 4.0, 5.0]  # difficulty levels pooled per domain; n_train is split across them
    band: list[float] = [0.2, 0.8]  # target group pass rate [low, high]: above moves up a level, below down
    window: int = 32  # recent scored rewards per domain that a decision reads
    min_evidence: int = 16  # rewards at the current level before a move
    cooldown: int = 2  # decisions after a move down before a move up
    start: float | None = None  # the level each domain starts at (None: the lowest)
    domains: list[str] | None = None  # the domains that follow it (None: every trained domain)
    exclude: list[str] = []  # trained domains that keep their fixed difficulty (e.g. a generator without levels)


class ScheduleConfig(Component):
    """schedule: which prompts each RL step draws. `name` is a `sched_policy` registry name (was
    schedule.policy); `args` its keyword arguments (e.g. {order_file: F} for fixed_order)."""

    name: str = "uniform"
    args: dict[str, Any] = {}
    curriculum: CurriculumConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return move_legacy_component_keys("schedule", data)


class EvalConfig(Section):
    before: bool = True  # `posttrain rl`: held-out pass@1 before RL (after the warm-up); false skips it
    after: bool = True  # and after RL; with either off the run reports no before/after comparison
    # Held-out pass@1 is one sample per task at this temperature (seeded when > 0); 0 = greedy.
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int = 1234
    max_new_tokens: int = Field(default=24, ge=1)


class AgentRecipeConfig(Section):
    """`posttrain quickstart --agent` (recipes/agent.py): the calculator-product tasks of the
    `tools` domain, an SFT warm-up on oracle plans that stops on a measured level, then SFT on a
    base model's habits, then RL for a wall-clock budget. SFT steps and lr come from `sft`."""

    n_train: int = Field(default=2000, ge=1)
    n_eval: int = Field(default=200, ge=1)
    val_tasks: int = Field(default=50, ge=1)  # validation tasks, from the training pool (never held-out)
    stop_at: float | None = Field(default=0.9, gt=0.0, le=1.0)  # stop the warm-up at this validation completion
    check_every: int = Field(default=25, ge=1)
    restart_after: int = Field(default=500, ge=1)  # re-initialise if no validation task is solved by this step
    restarts: int = Field(default=2, ge=0)
    reread: float = Field(default=0.5, ge=0.0, le=1.0)  # share of warm-up plans that re-read the question first
    habits: list[float] | None = Field(default=[0.9, 0.3, 0.3], min_length=3, max_length=3)  # GUESS_SMALL, GUESS_LARGE, RECHECK (agent_tasks.habit_tasks)
    habit_steps: int = Field(default=300, ge=0)
    habit_lr: float = Field(default=1e-3, gt=0.0)
    habit_min_copy: float = Field(default=0.8, ge=0.0, le=1.0)  # and completion when it calls >= this
    habit_stop_band: list[float] = Field(default=[0.3, 0.7], min_length=2, max_length=2)  # stop the habit SFT when the tool-call share is in [lo, hi]
    rl_minutes: float = Field(default=5.0, gt=0.0)  # RL wall-clock budget (rl.steps caps the steps)
    step_samples: int = Field(default=4, ge=1)  # sampled episodes per held-out task for the steps comparison


class ExternalAgentConfig(Section):
    """An agent process per episode behind the token-capturing proxy (rollout/agent/external.py, docs/serve.md)."""

    command: str | None = None  # shell command, e.g. "python examples/agents/react_agent.py"
    entry: str | None = None  # or a Python entry point "package.module:function"
    timeout_s: float = Field(default=0.0, ge=0.0)  # per episode; 0 -> the task's limits.timeout_s
    max_calls: int = Field(default=0, ge=0)  # model calls per episode; 0 -> the task's limits.max_steps
    env: dict[str, str] = {}  # extra environment for the agent process

    def model_post_init(self, _: Any) -> None:
        if (self.command is None) == (self.entry is None):
            raise ValueError("agent.external needs exactly one of command or entry")


class AgentConfig(Section):
    """Multi-step episodes (tasks with limits.max_steps > 1): budgets and reward shaping."""

    step_weight: float = 0.1  # bonus * (1 - steps / max_steps), on solved episodes only
    malformed_penalty: float = 0.1  # subtracted per malformed tool call
    obs_max_chars: int = 2000  # observations are truncated to this, with a marker
    token_budget: int = 0  # whole conversation; 0 -> the engine's context
    time_budget_s: float = 0.0  # per episode; 0 -> the task's limits.timeout_s
    concurrency: int = 64  # episodes (and sandbox sessions) alive at once
    retries: int = 1  # re-runs of an episode whose sandbox failed
    recipe: AgentRecipeConfig = AgentRecipeConfig()  # used only by `posttrain quickstart --agent`
    external: ExternalAgentConfig | None = None  # set -> multi-step tasks run this agent through the proxy


class ClusterConfig(Section):
    """Ray scale-out (posttrain/distributed): used only when `address` is set."""

    address: str | None = None  # "auto", "127.0.0.1:6379" or "ray://head:10001"; None -> all in-process
    rollout_workers: int = 2  # actors holding `fast` engines
    worker_cpus: float = 1.0  # Ray CPUs (and torch threads) per rollout worker
    staleness: int = 0  # a worker more than this many weight versions behind is refreshed before work
    weight_sync: Literal["object_store", "collective"] = "object_store"  # collective: torch.distributed broadcast (needs staleness 0)
    collective_backend: Literal["auto", "nccl", "gloo"] = "auto"  # auto -> nccl with CUDA, else gloo
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


class LogConfig(Section):
    """Where metrics go besides metrics.jsonl: registered trackers (posttrain/store/trackers)."""

    # `tracker` registry names: tensorboard | wandb (offline) | mlflow (local files) | trackio. Names, not
    # {name, args}: a tracker is built from the run directory and RunInfo (log.project) alone, and takes no arguments.
    trackers: Annotated[list[str], Registered("tracker")] = ["tensorboard"]
    project: str = "posttrain"  # the tracker's project / experiment name
    detect_every: int = Field(default=10, ge=0)  # RL steps between reward-hacking detector runs; 0 = off


class SecondModelConfig(Section):
    """One entry of a run's `models:` (judge, user, teacher): a model the run calls but does not
    train (posttrain/models/service.py, docs/second_model.md). Exactly one of `path` or `url`."""

    path: str | None = None  # an HF directory (or `tiny`), run in-process by posttrain's own engine
    url: str | None = None  # or an OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1 (posttrain serve)
    model: str = "default"  # the model id sent to `url`
    api_key_env: str | None = None  # environment variable holding the key for `url`
    engine: Annotated[str, Registered("engine")] = "fast"  # local only: an `engine` registry name (fast: paged KV, batched decode; hf: reference)
    concurrency: int = Field(default=4, ge=1)  # batches in flight at once
    batch: int = Field(default=16, ge=1)  # conversations per backend call
    timeout_s: float = Field(default=120.0, gt=0.0)  # per batch
    retries: int = Field(default=2, ge=0)  # re-tries of the conversations that failed
    backoff_s: float = Field(default=0.5, ge=0.0)  # first retry's wait; doubles each time
    max_new_tokens: int = Field(default=64, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)

    def model_post_init(self, _: Any) -> None:
        if (self.path is None) == (self.url is None):
            raise ValueError("a second model needs exactly one of path (a local HF directory or tiny) or url")

    def backend_name(self) -> str:
        """The `model_backend` registry name that serves this entry."""
        return "local" if self.path is not None else "openai"


class DistillConfig(Section):
    """`posttrain distill` (recipes/distill.py, docs/second_model.md): the teacher whose per-token logprobs
    the student learns from. `teacher` is the same entry as `models.teacher` (give one of the two)."""

    teacher: SecondModelConfig | None = None  # a local HF directory or `tiny`, same tokenizer as model.path
    eval_kl: bool = True  # held-out reverse KL to the teacher before and after (exact over the vocabulary)


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
    engine: Annotated[EngineConfig, Registered("engine", reserved=ENGINE_RESERVED)] = EngineConfig()
    sandbox: SandboxConfig = SandboxConfig()
    # schedule.args also carries the Scheduler's own keywords (order_file, n_buckets): the Scheduler checks them
    schedule: Annotated[ScheduleConfig, Registered("sched_policy", check_args=False)] = ScheduleConfig()
    eval: EvalConfig = EvalConfig()
    cluster: ClusterConfig = ClusterConfig()
    agent: AgentConfig = AgentConfig()
    log: LogConfig = LogConfig()
    threads: int = Field(default=0, ge=0, description="torch threads; 0 -> all cores")
    distill: DistillConfig = DistillConfig()  # posttrain distill: the teacher (docs/second_model.md)
    models: dict[str, SecondModelConfig] = {}  # second models by role: judge, user, teacher (docs/second_model.md)
    plugins: list[str] = []  # .py files defining extra domains/verifiers/losses, imported before validation
