"""`math_verify`: a competition-math final answer graded by Hugging Face's `math-verify`.

    Spec("math_verify", {"answer": "204"})   # 1.0 iff the final answer equals 204 symbolically

The final answer is the content of the LAST `\\boxed{...}` (or `\\fbox{...}`) of the
completion, braces matched; earlier boxes never count, and an unclosed last box fails
(it does not fall back to an earlier one). Without any box, math-verify's own extraction
reads the tail of the completion ("the final answer is $x$", a trailing expression) and
only its first-ranked candidate counts (`extraction_mode="first_match"`). The gold and
the answer are parsed with `math_verify.parse` and compared with `math_verify.verify`
(sympy equality: `\\frac{408}{2}`, `x = 204`, `\\text{204}` equal 204; sets, `\\pm`,
"a or b", intervals do not). Binary reward.

Hostile answers: the completion is capped at `max_chars` and the box at `max_box_chars`
before any parsing (over the cap: a fail with that reason). Parsing runs in a separate
worker process (`_Worker`, a pool of `workers`), because sympy can hang in C code that no
signal interrupts (`9^{9^{9^{9}}}` evaluates a 370-million-digit integer): math-verify's
own signal timeouts (`parse_timeout_s`) stop the ordinary slow cases inside the worker,
and a worker that does not answer within `timeout_s` is killed and replaced. Either
timeout is a fail with a reason (the answer's fault), never a crash. The worker's
address space is capped (`memory_mb`), so a giant expression ends in MemoryError there.

Needs the optional packages `math-verify` and `latex2sympy2_extended` (see
`pip install` in `REQUIREMENT`); building the verifier without them is a one-line
ConfigError. Limits: equivalence is math-verify's (6-digit float rounding, percent read
as its number); one worker call costs ~1-10 ms.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import queue
import re
import select
import subprocess
import sys
import threading
import time

from posttrain.errors import ConfigError
from posttrain.registry import verifier
from posttrain.types import Task, Trajectory, VerifyResult
from posttrain.tasks.mmath import GRADER_REQUIREMENT as REQUIREMENT, require_math_verify  # noqa: F401
from posttrain.verifiers.base import VerifyContext

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
TAIL_CHARS = 400  # without a box, only the end of the completion is read for an answer


def last_boxed(text: str) -> tuple[str | None, bool]:
    """(content of the last box, whether a box opened at all). Content is None when that box never closes."""
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None, False
    i = start = starts[-1]
    depth = 1
    while i < len(text) and depth:
        c = text[i]
        if c == "\\":  # an escape pair: \{ and \} are literal braces, \\ a line break
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        i += 1
    return (text[start : i - 1], True) if depth == 0 else (None, True)


# The worker: a separate interpreter that imports only math-verify (`python -I -c WORKER_SRC`).
# Protocol: one JSON request per line on stdin ({"gold", "pred", "boxed", "t"}), one JSON
# reply per line on stdout ({"ok": bool, "reason": str, "got": str}); "ready" first.
WORKER_SRC = r'''
import json, resource, sys
mem = int(sys.argv[1]) * 1024 * 1024
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
import logging
logging.disable(logging.CRITICAL)
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException
GOLD = {}
BOXED = [LatexExtractionConfig(boxed_match_priority=0)]
FREE = [LatexExtractionConfig(), ExprExtractionConfig()]
def gold(g, t):
    if g not in GOLD:
        GOLD[g] = parse(g if g.strip().startswith("$") else "$" + g + "$", FREE, parsing_timeout=t, raise_on_error=True)
    return GOLD[g]
def judge(req):
    t = max(1, int(req["t"]))
    g = gold(req["gold"], t)
    if not g:
        return {"ok": False, "reason": "the gold answer does not parse", "got": ""}
    text = "\\boxed{" + req["pred"] + "}" if req["boxed"] else req["pred"]
    p = parse(text, BOXED if req["boxed"] else FREE, extraction_mode="first_match", parsing_timeout=t, raise_on_error=True)
    if not p:
        return {"ok": False, "reason": "no parseable answer", "got": ""}
    ok = verify(g, p, timeout_seconds=t, raise_on_error=True)
    return {"ok": bool(ok), "reason": "" if ok else "not equal to the gold answer", "got": str(p[0])[:200]}
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    try:
        out = judge(json.loads(line))
    except TimeoutException:
        out = {"ok": False, "reason": "math-verify timed out", "got": ""}
    except MemoryError:
        out = {"ok": False, "reason": "math-verify ran out of memory", "got": ""}
    except BaseException as e:
        out = {"ok": False, "reason": "math-verify could not parse it: " + type(e).__name__, "got": ""}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
'''


class WorkerError(RuntimeError):
    """The worker could not be started (missing package, broken interpreter): an infra error."""


class _Worker:
    """One math-verify child process; `call` kills it on overrun (the next call starts a new one)."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb, self.proc = memory_mb, None
        self._buf = b""

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", WORKER_SRC, str(self.memory_mb)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._buf = b""
        if self._readline(60.0) != "ready":  # imports of sympy and antlr take ~1 s; a failure here is not the answer's
            self.kill()
            raise WorkerError("math-verify worker did not start (is math-verify installed in this interpreter?)")

    def _readline(self, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # the worker died (out of memory, killed)
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def call(self, req: dict, timeout_s: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return {"ok": False, "reason": "math-verify worker died on this answer", "got": ""}
        line = self._readline(timeout_s)
        if line is None:
            died = self.proc.poll() is not None
            self.kill()
            why = "died on this answer (out of memory?)" if died else f"took over {timeout_s:g}s on this answer (killed)"
            return {"ok": False, "reason": f"math-verify worker {why}", "got": ""}
        return json.loads(line)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                f.close()
        self.proc = None


class _Pool:
    """Up to `size` workers shared by every math_verify verifier in this process (threads take turns)."""

    def __init__(self) -> None:
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()
        self._all: list[_Worker] = []

    def call(self, req: dict, timeout_s: float, size: int, memory_mb: int) -> dict:
        with self._lock:
            if self._idle.empty() and self._made < size:
                self._made += 1
                w = _Worker(memory_mb)
                self._all.append(w)
                self._idle.put(w)
        w = self._idle.get()
        try:
            return w.call(req, timeout_s)
        finally:
            self._idle.put(w)

    def close(self) -> None:
        for w in self._all:
            w.kill()


POOL = _Pool()
atexit.register(POOL.close)


@verifier("math_verify", answer_format="line")
class MathVerify:
    """1.0 when the final answer (last box, see module doc) equals `answer` under math-verify, else 0."""

    def __init__(self, answer: str | int, max_chars: int = 32000, max_box_chars: int = 1000, timeout_s: float = 10.0,
                 parse_timeout_s: int = 3, workers: int = 2, memory_mb: int = 4096) -> None:
        require_math_verify()
        self.answer = str(answer).strip()
        if not self.answer:
            raise ConfigError("math_verify: the gold answer is empty")
        self.max_chars, self.max_box_chars, self.timeout_s = max_chars, max_box_chars, timeout_s
        self.parse_timeout_s, self.workers, self.memory_mb = parse_timeout_s, workers, memory_mb

    def judge(self, text: str) -> VerifyResult:
        """Blocking: the verdict on one completion's text (runs in the worker)."""
        if not text.strip():
            return VerifyResult.fail("empty answer")
        if len(text) > self.max_chars:
            return VerifyResult.fail(f"answer longer than {self.max_chars} characters")
        boxed, had_box = last_boxed(text)
        if had_box and boxed is None:
            return VerifyResult.fail("the last \\boxed{ is never closed")
        if had_box and not boxed.strip():
            return VerifyResult.fail("the last \\boxed{} is empty")
        pred = boxed if had_box else text[-TAIL_CHARS:]
        if len(pred) > self.max_box_chars:
            return VerifyResult.fail(f"boxed answer longer than {self.max_box_chars} characters")
        req = {"gold": self.answer, "pred": pred, "boxed": had_box, "t": self.parse_timeout_s}
        try:
            out = POOL.call(req, self.timeout_s, self.workers, self.memory_mb)
        except WorkerError as e:
            return VerifyResult.infra(str(e))
        details = {"got": out.get("got", ""), "expected": self.answer, "boxed": had_box}
        if out["ok"]:
            return VerifyResult(1.0, True, details)
        return VerifyResult.fail(out["reason"], **details)

    async def __call__(self, task: Task, trajectory: Trajectory, ctx: VerifyContext) -> VerifyResult:
        from posttrain.verifiers.math_answer import final_text

        return await asyncio.to_thread(self.judge, final_text(trajectory))
