from posttrain.types import Message, Spec, Task, Trajectory, Turn


def task(verifier: Spec, **kw) -> Task:
    return Task(id="t", domain="d", prompt=(Message("user", "q"),), verifier=verifier, **kw)


def answer(t: Task, text: str, steps: int = 1) -> Trajectory:
    turns = tuple(Turn("assistant", "thinking") for _ in range(steps - 1)) + ((Turn("assistant", text),) if text else ())
    return Trajectory(t.id, t.version, t.domain, (), turns)
