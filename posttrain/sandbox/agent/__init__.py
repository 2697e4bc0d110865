"""Programs that run *inside* a sandbox. Standard library only: they never import posttrain."""
