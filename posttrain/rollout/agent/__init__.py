"""The agent loop: multi-turn episodes with tool calls (loop.py), their rendering and
token bookkeeping, demonstrations for SFT, RL dispatch, and external agents behind a proxy."""
