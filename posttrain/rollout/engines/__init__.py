"""Engine backends other than `fast`: `hf` (the reference) and the optional `vllm`."""
