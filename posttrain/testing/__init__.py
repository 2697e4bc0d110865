"""Helpers for posttrain's own tests and benchmarks; nothing in the package imports them.

They ship inside the package (not under tests/) because the scripts in benchmarks/ use them
too, and those run without the test suite on sys.path. Training, evaluation and serving
never import this package: tests/unit/core/test_layering.py puts it on the top floor, with
`cli`, so nothing below may reach it.

Modules:
- gguf_tiny.py: writes a tiny random Llama as a GGUF file (the GGUF conversion tests);
- synthetic_runs.py: run directories with planted reward hacks, written through the store's
  API (the viewer's tests and benchmark, the detectors' tests);
- view_browser.py: the viewer driven in a headless Chromium (browser test, view benchmark);
- judge_probes.py: wrong answers dressed to persuade an LLM judge (judge tests and benchmark);
- pair_probes.py: the right answer listed beside a wrong one, for soundness checks of
  checkers we did not write (reasoning-gym's);
- simclock.py: an asyncio loop on virtual time, so the long-tail runner's tests and the
  scheduler and async simulators run the real runner instantly.
"""
