"""STAND-IN for verl.tools (test-only)."""
