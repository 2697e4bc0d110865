"""Asynchronous RL (rl.max_staleness >= 1): loop.py (trainer), pipeline.py (producer), state.py (resume),
correction.py (off-policy correction in the update), guard.py (drift guard). See docs/async_rl.md."""
