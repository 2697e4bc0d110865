"""Our GRPO-family RL step vs TRL's GRPOTrainer, side by side on the same tiny model.

    .venv/bin/pip install 'posttrain[bench]'          # trl + peft, never a library dependency
    .venv/bin/python benchmarks/vs_trl.py [--steps 30] [--repeats 2] [--lr 1e-3] [--threads 2]

Set-up, identical for both sides:
  model   LlamaConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
          num_attention_heads=4, num_key_value_heads=4), character vocabulary of 24 tokens
  data    2-digit addition "<|user|>a+b=<|end|><|assistant|>", 200 held-out pairs never trained on
  warm-up our SFT (assistant-only loss) until held-out greedy accuracy reaches 35-40%,
          saved once to a model directory that both sides load with from_pretrained
  RL      16 prompts x 8 generations per step, completion length 6, temperature 1, same LR,
          beta 0, one update per batch, loss "dapo", eps 0.2, max grad norm 1, constant LR,
          fp32, CPU, --threads threads; TRL with gradient_checkpointing off, bf16 off
  reward  1 iff the completion ends with the end-of-turn token and is exactly the sum
          (our verifier: format rule + exact_numeric; TRL: the same parse in a reward function)
  eval    the same greedy HF `generate` accuracy function on both final models

Our side is our own machinery: `build_state` + `train_rl` from posttrain/train/rl.py (fast
engine, verifier runner, scheduler, update_policy, weight sync, trajectory store). Runs
alternate (TRL, ours, ours, TRL, ...) and each row is the median over repeats.
Known differences: our loop drops zero-variance groups (DAPO dynamic sampling) and our
AdamW uses betas (0.9, 0.99) where TRL uses (0.9, 0.999).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.verifiers.numeric import parse_number  # noqa: E402

SPECIALS = ["<pad>", "<unk>", "<s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHARS = list("0123456789+-*= .\n")  # 7 + 17 = 24 tokens
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
GEN = 6


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(SPECIALS + CHARS)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                  eos_token="<|end|>", additional_special_tokens=SPECIALS[4:], padding_side="left")
    tok.chat_template = TEMPLATE
    return tok


def build_model(tok, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, vocab_size=len(tok), max_position_embeddings=64,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    m = LlamaForCausalLM(cfg)
    m.generation_config.pad_token_id, m.generation_config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    return m


def splits(seed: int = 0, n_held: int = 200):
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(seed).shuffle(pairs)
    return pairs[n_held:], pairs[:n_held]


def prompt_text(a: int, b: int) -> str:
    return f"<|user|>{a}+{b}=<|end|><|assistant|>"


@torch.no_grad()
def greedy_accuracy(model, tok, pairs) -> float:
    """The one evaluator for both sides: HF greedy generate, exact answer then end-of-turn."""
    model.eval()
    ok = 0
    for i in range(0, len(pairs), 100):
        chunk = pairs[i:i + 100]
        enc = tok([prompt_text(a, b) for a, b in chunk], return_tensors="pt", add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=GEN, do_sample=False, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)[:, enc["input_ids"].shape[1]:]
        for (a, b), row in zip(chunk, out.tolist()):
            ok += int(tok.eos_token_id in row and
                      parse_number(tok.decode(row[:row.index(tok.eos_token_id)])) == a + b)
    return ok / len(pairs)


def warm_model(model_dir: Path, train, held, seed: int = 0) -> float:
    """SFT warm-up to 35-40% held-out greedy accuracy (our SFT, assistant-only loss); cached."""
    from posttrain.config import SFTConfig, TrainerConfig
    from posttrain.train.chat_data import encode_conversation
    from posttrain.train.sft import train_encoded
    from posttrain.types import Message

    if (model_dir / "config.json").is_file():
        from transformers import AutoModelForCausalLM

        return greedy_accuracy(AutoModelForCausalLM.from_pretrained(model_dir), build_tokenizer(), held)
    tok = build_tokenizer()
    model = build_model(tok, seed)
    items = [encode_conversation(tok, (Message("user", f"{a}+{b}="), Message("assistant", str(a + b))))
             for a, b in train]
    cfg = SFTConfig(steps=4000, batch_size=128, lr=3e-3, warmup_steps=20, max_len=32)

    class Reached(Exception):
        pass

    def check(step: int, row: dict) -> None:
        if (step + 1) % 100 == 0:
            acc = greedy_accuracy(model, tok, held)
            model.train()
            print(f"  warm-up: {step + 1} SFT steps, loss {row['loss']:.3f}, held-out greedy accuracy {acc:.3f}",
                  flush=True)
            if acc >= 0.35:
                raise Reached

    try:
        train_encoded(model, tok.pad_token_id, items, cfg, TrainerConfig(), seed=seed, on_step=check)
    except Reached:
        pass
    acc = greedy_accuracy(model, tok, held)
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    return acc


def run_ours(model_dir: Path, train, held, steps: int, lr: float, seed: int) -> dict:
    from posttrain.config import load_config
    from posttrain.models import load_policy
    from posttrain.train.rl import build_state, train_rl
    from posttrain.types import Message, Spec, Task

    def task(a, b):
        return Task(f"add-{a}-{b}", "arithmetic", (Message("user", f"{a}+{b}="),), Spec("exact_numeric", {"answer": a + b}))

    cfg = load_config(None, [f"seed={seed}", f"rl.steps={steps}", "rl.prompts_per_step=16", "rl.group_size=8",
                             f"rl.max_new_tokens={GEN}", "rl.temperature=1.0", f"rl.lr={lr}", "rl.kl_coef=0",
                             "rl.warmup_steps=0",  # constant LR, as TRL's lr_scheduler_type="constant"
                             "rl.loss=dapo", "rl.clip_eps=0.2", "rl.clip_eps_high=0.2", "rl.update_epochs=1",
                             "rl.minibatches=1", "rl.checkpoint_every=0", "rl.max_grad_norm=1.0",
                             "tasks.domains={arithmetic: {n_train: 1, n_eval: 1}}"])
    model, tok = load_policy(model_dir)
    with tempfile.TemporaryDirectory() as d:
        st = build_state(cfg, Path(d), model, tok, [task(a, b) for a, b in train], [], None)
        rows: list[dict] = []
        asyncio.run(train_rl(st, on_step=lambda s, row: rows.append(row)))
        times = [r["time/step_s"] for r in rows]
        rewards = [r["reward/mean"] for r in rows]
        tokens = [r["completion_tokens/mean"] * 128 for r in rows]
        st.store.close()
        st.metrics.close()
        acc = greedy_accuracy(st.model, tok, held)
    return {"step_s": times, "rewards": rewards, "tokens": tokens, "acc": acc}


def run_trl(model_dir: Path, train, held, steps: int, lr: float, seed: int) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tok = build_tokenizer()
    eos = tok.eos_token_id

    def reward(completions, completion_ids, answer, **_):
        return [float(bool(ids) and ids[-1] == eos and parse_number(c) == float(a))
                for c, ids, a in zip(completions, completion_ids, answer)]

    class Timer(TrainerCallback):
        times: list = []

        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.t0)

    data = Dataset.from_list([{"prompt": prompt_text(a, b), "answer": a + b} for a, b in train])
    timer = Timer()
    timer.times = []
    with tempfile.TemporaryDirectory() as d:
        args = GRPOConfig(output_dir=d, per_device_train_batch_size=128, num_generations=8, max_completion_length=GEN,
                          temperature=1.0, top_p=1.0, top_k=0, learning_rate=lr, beta=0.0, num_iterations=1,
                          gradient_accumulation_steps=1, max_steps=steps, lr_scheduler_type="constant",
                          warmup_steps=0, gradient_checkpointing=False, bf16=False, use_cpu=True, logging_steps=1,
                          report_to=[], save_strategy="no", seed=seed, loss_type="dapo", epsilon=0.2,
                          max_grad_norm=1.0, disable_tqdm=True, dataloader_num_workers=0)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        tr = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data, processing_class=tok,
                         callbacks=[timer])
        tr.remove_callback(PrinterCallback)  # no per-step log dicts on stdout
        tr.train()
        logs = [h for h in tr.state.log_history if "reward" in h]
        acc = greedy_accuracy(tr.model, tok, held)
    return {"step_s": timer.times, "rewards": [h["reward"] for h in logs],
            "tokens": [h.get("completions/mean_length", 0.0) * 128 for h in logs], "acc": acc}


def summarize(runs: list[dict]) -> dict:
    step = statistics.median(statistics.median(r["step_s"][1:]) for r in runs)  # step 0 pays one-time warm-up
    tps = statistics.median(sum(r["tokens"]) / sum(r["step_s"]) for r in runs)
    acc = statistics.median(r["acc"] for r in runs)
    n = len(runs[0]["rewards"])
    curve = [statistics.mean(statistics.mean(r["rewards"][i:i + 5]) for r in runs) for i in range(0, n, 5)]
    return {"step_s": step, "tok_s": tps, "acc": acc, "curve": curve, "accs": [r["acc"] for r in runs]}


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-dir", type=Path, default=Path("runs/vs_trl/warm-model"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    train, held = splits(args.seed)
    args.model_dir.parent.mkdir(parents=True, exist_ok=True)
    before = warm_model(args.model_dir, train, held, args.seed)
    print(f"warm model {args.model_dir}: held-out greedy accuracy {before:.3f}", flush=True)
    runs: dict[str, list[dict]] = {"trl": [], "ours": []}
    for r in range(args.repeats):
        for side in (("trl", "ours") if r % 2 == 0 else ("ours", "trl")):
            fn = run_trl if side == "trl" else run_ours
            res = fn(args.model_dir, train, held, args.steps, args.lr, args.seed + r)
            runs[side].append(res)
            print(f"  repeat {r} {side:4}: median {statistics.median(res['step_s'][1:]):.4f} s/step, "
                  f"held-out acc {res['acc']:.3f}", flush=True)
    s = {k: summarize(v) for k, v in runs.items()}
    t, o = s["trl"], s["ours"]
    print(f"\n{args.steps} steps x {args.repeats} repeats, {args.threads} threads, lr {args.lr}, "
          f"held-out accuracy before RL {before:.3f}\n")
    print("| metric | TRL GRPOTrainer | posttrain | ours / TRL |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| median s/step | {t['step_s']:.4f} | {o['step_s']:.4f} | {o['step_s'] / t['step_s']:.2f}x |")
    print(f"| generated tokens/s (per step wall) | {t['tok_s']:.0f} | {o['tok_s']:.0f} | {o['tok_s'] / t['tok_s']:.2f}x |")
    print(f"| held-out greedy acc after {args.steps} steps (median) | {t['acc']:.3f} | {o['acc']:.3f} | "
          f"{o['acc'] - t['acc']:+.3f} |")
    print(f"| held-out acc per repeat | {', '.join(f'{a:.3f}' for a in t['accs'])} | "
          f"{', '.join(f'{a:.3f}' for a in o['accs'])} | |")
    print(f"| reward curve (mean per 5 steps) | {' '.join(f'{x:.2f}' for x in t['curve'])} | "
          f"{' '.join(f'{x:.2f}' for x in o['curve'])} | |")


if __name__ == "__main__":
    main()
