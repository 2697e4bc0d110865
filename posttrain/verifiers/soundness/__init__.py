"""Soundness of a domain's verifier, checked through the path RL uses (`posttrain tasks check`).

- `check.py`: the oracle passes, empty and wrong answers fail, verdicts repeat (no flakes);
- `hack_probes.py`, `hack_probes_exec.py`: generic exploit answers per kind of domain (code,
  shell, tool calls, structured output, text), written without knowing any task's answer;
- `probe_check.py`: runs every probe through `VerifierRunner` (format rule, batching, the
  sandbox pool), alone and beside honest siblings, and reports `hack_pass_rate`.
"""
