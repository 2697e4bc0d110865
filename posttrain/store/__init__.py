"""The run directory: trajectory store, metrics log, TensorBoard events."""
