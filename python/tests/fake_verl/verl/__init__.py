"""STAND-IN for verl (test-only; shapes of three base classes, not verl). See ../README.md."""
