"""Start-time forecasts for pending workloads (docs/forecasting.md).

Pure, synchronous and deterministic, like the core it runs forward: the simulator's
`--record-forecasts` and the serving worker call the same functions.
"""
