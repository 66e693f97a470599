"""Job traces imported into simulator scenarios (docs/simulate.md#importing-traces).

One module per trace format reads records into `TraceJob`s; `scenario` maps them, with
the cluster's capacity, to Kueue objects and a Scenario of arrivals. Pure and
synchronous: the caller opens the files and hands over lines.
"""
