"""The `fast` engine: continuous batching, paged KV cache, prefix cache, speculative
decoding, C kernels on CPU and CUDA graphs on GPU (engine.py is the entry point)."""
