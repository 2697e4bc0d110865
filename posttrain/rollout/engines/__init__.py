"""Engine backends: `hf` (the reference), `fast/` (the default; a sub-package) and the optional `vllm`."""
