"""STAND-IN for verl.interactions (test-only)."""
