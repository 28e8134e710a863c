"""Pure functions over a Trace: summary, devices, speed of light, fusion, compare (no Qt)."""
