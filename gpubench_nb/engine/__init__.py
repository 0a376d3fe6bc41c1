"""The only code that touches torch: backends, timing, memory, environment capture, the
inference loop and fault injection. Imports from `protocol` only."""
