"""The run-config schema: one pydantic section per part of a run, each forbidding unknown keys.

posttrain/config.py loads YAML and dotted overrides into `RunConfig` and re-exports every
section, so `from posttrain.config import RLConfig` keeps working; the loader lives there.
Two parts live in modules of their own and are re-exported here: the `optim` section every
training phase has (config_optim.py) and the `rl:` section with its sub-sections (config_rl.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from typing_extensions import Annotated

from posttrain.config_components import (
    ENGINE_RESERVED,
    Component,
    Registered,
    Section,
    move_legacy_component_keys,
    named,
)
# Re-exported: config.py and the callers read the optim and rl sections here too.
from posttrain.config_optim import LEGACY_OPTIM_KEYS, OPTIM_DEFAULTS, OptimConfig, move_legacy_optim_keys, phase_optim  # noqa: F401
from posttrain.config_rl import InfraErrorConfig, LongTailConfig, OffPolicyConfig, OverlongConfig, RLConfig  # noqa: F401


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
    optim: Annotated[OptimConfig, *phase_optim("sft")]  # lr 3e-3, cosine, 10 warm-up steps (was sft.lr, ...)
    batch_size: int = Field(default=64, ge=1)
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
    precision: Literal["auto", "fp32", "bf16"] = "auto"  # auto -> bf16 autocast on CUDA with bf16 (and in RL on a CPU whose bf16 rollouts measured faster), else fp32; or fp32 / bf16
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
    optim: Annotated[OptimConfig, *phase_optim("dpo")]  # lr 1e-4, cosine, 5 warm-up steps (was dpo.lr, ...)
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
    # false: the levels' tasks are pooled as above but every level is drawn from, nothing moves (a baseline
    # with the same training tasks as a steered run, e.g. benchmarks/hundred_domains.py's uniform arm)
    steer: bool = True


class ScheduleConfig(Component):
    """schedule: which prompts each RL step draws. `name` is a `sched_policy` registry name (was
    schedule.policy); `args` its keyword arguments (e.g. {order_file: F} for fixed_order)."""

    name: str = "uniform"
    args: dict[str, Any] = {}
    curriculum: CurriculumConfig | None = None
    # How a step's prompts split across domains (schedule/domain_shares.py): "mixture" = exactly each
    # domain's tasks.domains.<d>.weight share; "signal" = that weight times the rate at which the domain's
    # groups carried reward variance lately, so hopeless and solved domains fade (never to 0) and the
    # domains at the model's edge get the draws.
    domain_shares: Literal["mixture", "signal"] = "mixture"

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


TOOLS_PROMPT_MODES = ("auto", "template", "text", "none")  # agent.tools_prompt (rollout/agent/tool_prompt.py)


class AgentConfig(Section):
    """Multi-step episodes (tasks with limits.max_steps > 1): budgets and reward shaping."""

    step_weight: float = 0.1  # bonus * (1 - steps / max_steps), on solved episodes only
    malformed_penalty: float = 0.1  # subtracted per malformed tool call
    obs_max_chars: int = 2000  # observations are truncated to this, with a marker
    token_budget: int = 0  # whole conversation; 0 -> the engine's context
    time_budget_s: float = 0.0  # per episode; 0 -> the task's limits.timeout_s
    concurrency: int = 64  # episodes (and sandbox sessions) alive at once
    retries: int = 1  # re-runs of an episode whose sandbox failed
    # How the episode's tools reach the model (rollout/agent/tool_prompt.py): template -> the chat
    # template's own tool rendering (Qwen, Llama 3.1); text -> a listing in the system message (SmolLM2);
    # none -> the prompt as the task wrote it; auto -> template if the template renders tools, else text
    # if the listing fits in half the budget (agent.token_budget, else the context), else none (the tiny model).
    tools_prompt: Literal[TOOLS_PROMPT_MODES] = "auto"
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
    # One recipe's own settings, by recipe name: `recipe: {rl: {stop_at_pass: 0.3}, agent: {rl_minutes: 10}}`.
    # Each recipe declares their section where it is registered (`@recipe("agent", settings=...)`), so they
    # live with the recipe, not here; config.py validates them at load (check_recipe_settings).
    recipe: dict[str, dict[str, Any]] = {}
