"""posttrain: post-train language models on verifiable tasks."""
__version__ = "0.1.0"
