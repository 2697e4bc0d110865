"""`terminal`: multi-step shell tasks in a sandbox session, checked on the final files.

Task kinds: fix a broken script, rename files by a rule, fill a config, make a test
pass. The agent gets a persistent shell (`shell` tool); the verifier
(`step_efficiency(terminal_checks)`) runs a hidden check script in a fresh sandbox over
the final workspace (see `verifiers/terminal.py`). Every check fails on the starting
files, so doing nothing scores 0. Difficulty (0..3) scales the number of files, keys and
test cases. The oracle is a plan of `shell` calls.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, AsyncIterator

from posttrain.registry import domain
from posttrain.tasks.plan import dump_plan, parse_plan
from posttrain.types import Environment, Limits, Message, Spec, Task

Made = tuple[str, dict[str, str], list[str], str, list[str]]  # instruction, files, oracle cmds, check script, names


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _heredoc(path: str, text: str) -> str:
    return f"cat > {path} <<'PT_EOF'\n{text}PT_EOF"


def _fix_script(rng: random.Random, level: int) -> Made:
    nums = [rng.randrange(1, 100) for _ in range(5 + 5 * level)]
    good = "import sys\ntotal = 0\nfor line in open(sys.argv[1]):\n    total = total + int(line)\nprint(total)\n"
    bug = rng.choice([("total + int(line)", "total - int(line)"), ("print(total)", "print(total + 1)"), ("int(line)", "int(line) * 2")])
    files = {"data.txt": "".join(f"{n}\n" for n in nums), "total.py": good.replace(*bug)}
    check = (f"check output [ \"$(python3 total.py data.txt)\" = \"{sum(nums)}\" ]\n"
             f"check data_intact [ \"$(python3 total.py data.txt)\" = \"{sum(nums)}\" -a \"$(cksum < data.txt)\" = \"$(printf %s {_sh_quote(files['data.txt'])} | cksum)\" ]\n")
    cmds = [f"sed -i {_sh_quote('s/' + bug[1].replace('*', '[*]') + '/' + bug[0] + '/')} total.py", "python3 total.py data.txt"]
    return ("total.py should print the sum of the numbers in data.txt (`python3 total.py data.txt`) but prints the wrong "
            "value. Fix total.py; do not change data.txt.", files, cmds, check, ["output", "data_intact"])


def _rename(rng: random.Random, level: int) -> Made:
    ids = rng.sample(range(1, 300), 2 + 2 * level)
    files = {f"report_{i}.txt": f"report {i}: {rng.randrange(10**6)}\n" for i in ids}
    files["keep.md"] = "do not rename me\n"
    check, names = "", []
    for i in ids:
        new = f"{i:03d}_report.txt"
        check += f"check r{i} [ -f {new} -a ! -e report_{i}.txt -a \"$(cat {new})\" = {_sh_quote(files[f'report_{i}.txt'].rstrip())} ]\n"
        names.append(f"r{i}")
    cmd = "for f in report_*.txt; do n=${f#report_}; n=${n%.txt}; mv \"$f\" \"$(printf '%03d' \"$n\")_report.txt\"; done"
    return ("Rename every file report_<N>.txt to <NNN>_report.txt, where NNN is N zero-padded to 3 digits. "
            "Keep contents unchanged; leave other files alone.", files, [cmd, "ls"], check, names)


def _config(rng: random.Random, level: int) -> Made:
    keys = rng.sample(["port", "host", "workers", "timeout", "log_level", "cache_dir", "retries", "region"], 2 + 2 * level)
    vals = {k: str(rng.choice([rng.randrange(2, 9000), rng.choice(["eu-west", "debug", "/var/cache/app", "db.internal"])])) for k in keys}
    template = "[server]\n" + "".join(f"{k} = TODO\n" for k in keys)
    check = "".join(f"check {k} [ \"$(grep -E '^{k} *=' app.ini | head -1 | sed -E 's/^[^=]*= *//')\" = {_sh_quote(vals[k])} ]\n" for k in keys)
    check += "check complete sh -c \"grep -qx '\\[server\\]' app.ini && ! grep -q TODO app.ini\"\n"
    body = "[server]\n" + "".join(f"{k} = {vals[k]}\n" for k in keys)
    spec = ", ".join(f"{k}={vals[k]}" for k in keys)
    return (f"Fill in every TODO in app.ini with these values: {spec}. Keep the [server] section header.",
            {"app.ini": template}, [_heredoc("app.ini", body)], check, keys + ["complete"])


def _make_test_pass(rng: random.Random, level: int) -> Made:
    k = rng.randrange(2, 9)
    cases = [(x, x * k + 1) for x in rng.sample(range(1, 50), 2 + level)]
    tests = "from lib import scale\n" + "".join(f"assert scale({x}) == {y}, 'scale({x})'\n" for x, y in cases)
    files = {"lib.py": f"def scale(x):\n    return x * {k}\n", "test_lib.py": tests}
    # The check compares the printed value in the check's own shell, never the exit status of a
    # process running the agent's lib.py: that code can turn a failed assert into exit 0 (an
    # atexit hook calling os._exit(0), a patched sys.excepthook).
    check = "".join(f"check case{i} [ \"$(python3 -c {_sh_quote(f'from lib import scale; print(repr(scale({x})))')} 2>/dev/null)\" = {y} ]\n"
                    for i, (x, y) in enumerate(cases))
    cmds = [f"sed -i 's/return x \\* {k}$/return x * {k} + 1/' lib.py", "python3 test_lib.py && echo ok"]
    return ("`python3 test_lib.py` fails. Fix lib.py (not the test) so the test passes.", files, cmds, check, [f"case{i}" for i in range(len(cases))])


KINDS = {"fix_script": _fix_script, "rename": _rename, "config": _config, "make_test_pass": _make_test_pass}


@contextlib.asynccontextmanager
async def open_task_session(sandbox: Any, task: Task) -> AsyncIterator[Any]:
    """A sandbox session holding the task's starting files."""
    from posttrain.tasks.exec_session import session_for

    async with session_for(sandbox, task.environment.image) as session:
        for path, text in task.environment.files.items():
            await session.write_file(path, text)
        await session.snapshot()  # later diffs are against the starting files
        yield session


@domain("terminal")
class Terminal:
    name = "terminal"

    def __init__(self, max_new_tokens: int = 256) -> None:
        self.max_new_tokens = max_new_tokens

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        rng = random.Random(f"terminal:{seed}:{difficulty}")
        level = max(0, min(3, round(difficulty)))
        tasks = []
        for i in range(n):
            kind = sorted(KINDS)[i % len(KINDS)] if n >= len(KINDS) else rng.choice(sorted(KINDS))
            instruction, files, cmds, script, names = KINDS[kind](rng, level)
            plan = [{"tool": "shell", "arguments": {"cmd": c}} for c in cmds] + [{"answer": "done"}]
            tasks.append(Task(
                id=f"terminal-{seed}-{i}", domain=self.name,
                prompt=(Message("system", "You have a shell in the task directory (tool `shell`). Say 'done' when finished."),
                        Message("user", instruction)),
                verifier=Spec("step_efficiency", {"inner": {"name": "terminal_checks", "args": {"script": script, "names": names}}, "floor": 0.5}),
                difficulty=float(level), environment=Environment(image="host", files=files, tools=("shell",)),
                limits=Limits(max_steps=len(plan) + 8, max_new_tokens=self.max_new_tokens, timeout_s=120.0),
                metadata={"kind": kind, "reference_steps": len(plan), "needs_sandbox": True},
                oracle=dump_plan(plan),
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        """A plausible but wrong episode: a wrong edit, or a partial fix."""
        steps = parse_plan(task.oracle or "")
        wrong = {"fix_script": "echo 'print(0)' >> total.py",
                 "rename": "for f in report_*.txt; do n=${f#report_}; n=${n%.txt}; mv \"$f\" \"$(printf %04d \"$n\")_report.txt\"; done",
                 "config": "sed -i 's/TODO/0/' app.ini",
                 "make_test_pass": "printf 'def scale(x):\\n    return x + 1\\n' > lib.py"}[task.metadata["kind"]]
        return dump_plan([{"tool": "shell", "arguments": {"cmd": wrong}}] + steps[-1:])
